package conversations

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/mosaic-agents/mosaic/internal/atomicfile"
	"github.com/mosaic-agents/mosaic/internal/xdg"
	"github.com/mosaic-agents/mosaic/protocol"
)

// Store is the directory of conversation files.
type Store struct {
	Dir string
}

// ConfigDir returns mosaic's configuration directory,
// $XDG_CONFIG_HOME/mosaic, falling back to ~/.config as the XDG base
// directory spec says: the conversations' settings, and the keys the
// README keeps beside them.
func ConfigDir() (string, error) {
	base, err := xdg.ConfigHome()
	if err != nil {
		return "", err
	}
	return filepath.Join(base, "mosaic"), nil
}

// DefaultDir returns $XDG_CONFIG_HOME/mosaic/conversations.
func DefaultDir() (string, error) {
	d, err := ConfigDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "conversations"), nil
}

// Open returns the store in the default directory.
func Open() (*Store, error) {
	dir, err := DefaultDir()
	if err != nil {
		return nil, err
	}
	return &Store{Dir: dir}, nil
}

func (s *Store) path(id string) string { return filepath.Join(s.Dir, id+".toml") }

// Load reads one conversation strictly: unknown keys, a file that does not
// validate or an id that does not match its file name are refused.
func (s *Store) Load(id string) (*Conversation, error) {
	if !ValidID(id) {
		return nil, protocol.Refuse(protocol.CodeUnknownConv, "%q is not a conversation id (pi- and 20 hex digits); see `mosaicctl conv list`", id)
	}
	p := s.path(id)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, protocol.Refuse(protocol.CodeUnknownConv, "no conversation %s (no %s); see `mosaicctl conv list`", id, p)
	}
	if err != nil {
		return nil, protocol.Wrap(protocol.CodeConfiguration, err, "read %s", p)
	}
	var c Conversation
	md, err := toml.Decode(string(b), &c)
	var pe toml.ParseError
	switch {
	case errors.As(err, &pe) && strings.HasPrefix(pe.Message, protocol.CodeConfiguration+": "):
		// A limit that does not parse: its own refusal names the key,
		// the value and an example (the decoder keeps only its text).
		return nil, broken(id, protocol.Refuse(protocol.CodeConfiguration, "%s: line %d: %s", p, pe.Position.Line,
			strings.TrimPrefix(pe.Message, protocol.CodeConfiguration+": ")))
	case err != nil:
		return nil, broken(id, fmt.Errorf("%s: %w", p, err))
	}
	if extra := md.Undecoded(); len(extra) > 0 {
		keys := make([]string, len(extra))
		for i, k := range extra {
			keys[i] = k.String()
		}
		return nil, broken(id, protocol.Refuse(protocol.CodeConfiguration, "%s: unknown key(s) %s; remove them (known keys: id, project, seat, workspace, session, idle_stop, engine_kind, [engine], [limits], [claude])", p, strings.Join(keys, ", ")))
	}
	if c.ID != id {
		return nil, broken(id, fmt.Errorf("%s: %w", p, refuseField("id", c.ID, "differs from the file name "+filepath.Base(p))))
	}
	if err := c.Validate(); err != nil {
		return nil, broken(id, fmt.Errorf("%s: %w", p, err))
	}
	return &c, nil
}

// Encode renders c as the TOML the store writes.
func Encode(c *Conversation) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString("# A mosaic conversation, written by `mosaicctl conv add`.\n")
	if err := toml.NewEncoder(&buf).Encode(c); err != nil {
		return nil, fmt.Errorf("encode conversation %s: %w", c.ID, err)
	}
	return buf.Bytes(), nil
}

// Save writes c atomically (temp file, fsync, rename, fsync of the
// directory), so a crash leaves the old file or the new one, never half.
func (s *Store) Save(c *Conversation) error {
	if err := c.Validate(); err != nil {
		return err
	}
	b, err := Encode(c)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", s.Dir, err)
	}
	return atomicfile.Write(s.path(c.ID), b, 0o600)
}

// Remove deletes a conversation's file.
func (s *Store) Remove(id string) error {
	if _, err := s.Load(id); err != nil && protocol.CodeOf(err) == protocol.CodeUnknownConv {
		return err
	}
	if err := os.Remove(s.path(id)); err != nil {
		return fmt.Errorf("remove conversation %s: %w", id, err)
	}
	return atomicfile.SyncDir(s.Dir)
}

// List returns every stored conversation id in order, and the files that
// did not load, so one broken file never hides the others.
func (s *Store) List() ([]*Conversation, map[string]error, error) {
	ents, err := os.ReadDir(s.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("list %s: %w", s.Dir, err)
	}
	var ids []string
	for _, e := range ents {
		if id, ok := strings.CutSuffix(e.Name(), ".toml"); ok && ValidID(id) {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	var out []*Conversation
	bad := map[string]error{}
	for _, id := range ids {
		c, err := s.Load(id)
		if err != nil {
			bad[id] = err
			continue
		}
		out = append(out, c)
	}
	return out, bad, nil
}

// broken refuses the file of conversation id, which does not load, with
// err (which names the file) and both ways out: the file can be fixed by
// hand, or the conversation removed by id, which needs no loadable file.
func broken(id string, err error) error {
	r := protocol.Wrap(protocol.CodeConfiguration, err, "")
	r.Message += fmt.Sprintf("; fix the file, or remove the conversation (`mosaicctl conv rm %s`) and add it again", id)
	return r
}
