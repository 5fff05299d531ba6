package fakepi

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/mosaic-agents/mosaic/protocol"
)

// session models Pi's SessionManager for one --session file: entries kept
// in memory, the file written lazily (nothing on disk until the first
// assistant message exists; then the header and every pending entry at once
// with O_EXCL; later entries appended), and an existing file resumed with
// the leaf at its last line.
type session struct {
	path    string
	cwd     string
	id      string
	header  obj
	entries []json.RawMessage // in append order, header excluded
	ids     []string
	parents []string // "" for null
	leaf    string
	flushed bool
	hasAsst bool
	log     io.Writer // FAKEPI_SESSION_LOG: every byte the fake writes to the file
	now     func() time.Time
}

func newSessionID(now time.Time) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	ms := uint64(now.UnixMilli())
	var t [8]byte
	binary.BigEndian.PutUint64(t[:], ms)
	copy(b[0:6], t[2:8])
	b[6] = 0x70 | (b[6] & 0x0f) // version 7
	b[8] = 0x80 | (b[8] & 0x3f)
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func isoTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// openSession loads path if it exists, else starts a new in-memory session.
func openSession(path, cwd string, log io.Writer, now func() time.Time) (*session, error) {
	s := &session{path: path, cwd: cwd, log: log, now: now}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		s.newHeader()
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read session: %w", err)
	}
	if len(b) == 0 {
		// Pi initialises an empty file with a header at once.
		s.newHeader()
		line, err := protocol.Marshal(s.header)
		if err != nil {
			return nil, err
		}
		if err := s.write(os.O_WRONLY|os.O_TRUNC, append(line, '\n')); err != nil {
			return nil, err
		}
		s.flushed = true
		return s, nil
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	first := true
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var e struct {
			Type     string  `json:"type"`
			ID       string  `json:"id"`
			ParentID *string `json:"parentId"`
			Message  *struct {
				Role string `json:"role"`
			} `json:"message"`
		}
		if err := json.Unmarshal(line, &e); err != nil {
			continue // Pi skips lines it cannot parse
		}
		if first && e.Type == "session" {
			first = false
			s.id = e.ID
			s.header = obj{{"raw", json.RawMessage(append([]byte(nil), line...))}}
			continue
		}
		first = false
		s.entries = append(s.entries, json.RawMessage(append([]byte(nil), line...)))
		s.ids = append(s.ids, e.ID)
		p := ""
		if e.ParentID != nil {
			p = *e.ParentID
		}
		s.parents = append(s.parents, p)
		s.leaf = e.ID
		if e.Type == "message" && e.Message != nil && e.Message.Role == "assistant" {
			s.hasAsst = true
		}
	}
	if s.id == "" {
		return nil, fmt.Errorf("session file is not a valid pi session: %s", path)
	}
	s.flushed = true
	return s, nil
}

func (s *session) newHeader() {
	now := s.now()
	s.id = newSessionID(now)
	s.header = obj{{"type", "session"}, {"version", 3}, {"id", s.id}, {"timestamp", isoTime(now)}, {"cwd", s.cwd}}
}

func (s *session) headerLine() ([]byte, error) {
	if raw, ok := s.header.get("raw").(json.RawMessage); ok && len(s.header) == 1 {
		return raw, nil
	}
	return protocol.Marshal(s.header)
}

func newEntryID(taken []string) string {
	for {
		var b [4]byte
		_, _ = rand.Read(b[:])
		id := hex.EncodeToString(b[:])
		dup := false
		for _, t := range taken {
			if t == id {
				dup = true
				break
			}
		}
		if !dup {
			return id
		}
	}
}

// hasMessages reports whether the session holds any message entry.
func (s *session) hasMessages() bool {
	for _, e := range s.entries {
		var m struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(e, &m) == nil && m.Type == "message" {
			return true
		}
	}
	return false
}

// hasThinkingOnBranch reports whether the branch from the leaf to the root
// holds a thinking_level_change.
func (s *session) hasThinkingOnBranch() bool {
	idx := map[string]int{}
	for i, id := range s.ids {
		idx[id] = i
	}
	cur := s.leaf
	for steps := 0; cur != "" && steps <= len(s.ids); steps++ {
		i, ok := idx[cur]
		if !ok {
			break
		}
		var m struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(s.entries[i], &m) == nil && m.Type == "thinking_level_change" {
			return true
		}
		cur = s.parents[i]
	}
	return false
}

// append adds an entry of type typ with the given fields after the common
// ones, as a child of the leaf, and persists it per Pi's lazy rule.
func (s *session) append(typ string, fields obj) (string, error) {
	id := newEntryID(s.ids)
	var parent any
	if s.leaf != "" {
		parent = s.leaf
	}
	e := obj{{"type", typ}, {"id", id}, {"parentId", parent}, {"timestamp", isoTime(s.now())}}
	e = append(e, fields...)
	line, err := protocol.Marshal(e)
	if err != nil {
		return "", fmt.Errorf("encode entry: %w", err)
	}
	s.entries = append(s.entries, line)
	s.ids = append(s.ids, id)
	s.parents = append(s.parents, s.leaf)
	s.leaf = id
	if typ == "message" {
		if m, ok := fields.get("message").(obj); ok && m.get("role") == "assistant" {
			s.hasAsst = true
		}
	}
	return id, s.persist(line)
}

func (s *session) persist(line []byte) error {
	if !s.hasAsst {
		if s.flushed {
			return s.write(os.O_WRONLY|os.O_APPEND, append(append([]byte(nil), line...), '\n'))
		}
		return nil
	}
	if !s.flushed {
		var b bytes.Buffer
		h, err := s.headerLine()
		if err != nil {
			return err
		}
		b.Write(h)
		b.WriteByte('\n')
		for _, e := range s.entries {
			b.Write(e)
			b.WriteByte('\n')
		}
		if err := s.write(os.O_WRONLY|os.O_CREATE|os.O_EXCL, b.Bytes()); err != nil {
			return err
		}
		s.flushed = true
		return nil
	}
	return s.write(os.O_WRONLY|os.O_APPEND, append(append([]byte(nil), line...), '\n'))
}

func (s *session) write(flag int, b []byte) error {
	f, err := os.OpenFile(s.path, flag, 0o644)
	if err != nil {
		return fmt.Errorf("session file: %w", err)
	}
	_, werr := f.Write(b)
	cerr := f.Close()
	if werr != nil {
		return fmt.Errorf("session file write: %w", werr)
	}
	if cerr != nil {
		return fmt.Errorf("session file close: %w", cerr)
	}
	if s.log != nil {
		if _, err := s.log.Write(b); err != nil {
			return fmt.Errorf("session log: %w", err)
		}
	}
	return nil
}

// entriesSince lists the entries after the one with id since ("" for all).
func (s *session) entriesSince(since string) ([]json.RawMessage, bool) {
	if since == "" {
		return append([]json.RawMessage{}, s.entries...), true
	}
	for i, id := range s.ids {
		if id == since {
			return append([]json.RawMessage{}, s.entries[i+1:]...), true
		}
	}
	return nil, false
}

// tree builds get_tree's nodes: children in append order, entries whose
// parent is missing become extra roots.
func (s *session) tree() []any {
	nodes := make([]obj, len(s.ids))
	children := make([][]int, len(s.ids))
	idx := map[string]int{}
	for i, id := range s.ids {
		idx[id] = i
	}
	var roots []int
	for i := range s.ids {
		p := s.parents[i]
		if j, ok := idx[p]; ok && p != "" && j != i {
			children[j] = append(children[j], i)
		} else {
			roots = append(roots, i)
		}
	}
	var build func(i int, depth int) obj
	build = func(i int, depth int) obj {
		kids := []any{}
		if depth < len(s.ids) {
			for _, c := range children[i] {
				kids = append(kids, build(c, depth+1))
			}
		}
		nodes[i] = obj{{"entry", s.entries[i]}, {"children", kids}}
		return nodes[i]
	}
	out := []any{}
	for _, r := range roots {
		out = append(out, build(r, 0))
	}
	return out
}

// messageEntries returns the message entries on disk order.
func (s *session) messageEntries() []json.RawMessage {
	var out []json.RawMessage
	for _, e := range s.entries {
		var m struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(e, &m) == nil && m.Type == "message" {
			out = append(out, e)
		}
	}
	return out
}
