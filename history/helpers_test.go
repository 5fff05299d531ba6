package history

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/mosaic-agents/mosaic/protocol"
)

// fixture is a project tree with one sessions directory.
type fixture struct {
	root string // the tree the no-write check fingerprints
	dir  string // <project>/.pi/state/<seat>/sessions
	path string // <dir>/s.jsonl
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "proj", ".pi", "state", "seat", "sessions")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return &fixture{root: root, dir: dir, path: filepath.Join(dir, "s.jsonl")}
}

// write replaces the session file's content (a fixture step, not a read).
func (f *fixture) write(t *testing.T, content string) {
	t.Helper()
	if err := os.WriteFile(f.path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// append adds to the session file in place, as Pi does.
func (f *fixture) append(t *testing.T, content string) {
	t.Helper()
	fh, err := os.OpenFile(f.path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if _, err := fh.WriteString(content); err != nil {
		t.Fatal(err)
	}
}

// read is Read under the no-write check.
func (f *fixture) read(t *testing.T) (*Snapshot, error) {
	t.Helper()
	var s *Snapshot
	var err error
	unchanged(t, f.root, func() { s, err = Read(f.path, Options{}) })
	return s, err
}

// mustRead reads and fails the test on a refusal.
func (f *fixture) mustRead(t *testing.T) *Snapshot {
	t.Helper()
	s, err := f.read(t)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	return s
}

// follow is Follow under the no-write check.
func (f *fixture) follow(t *testing.T, prev *Snapshot) (*Snapshot, error) {
	t.Helper()
	var s *Snapshot
	var err error
	unchanged(t, f.root, func() { s, err = Follow(f.path, prev, Options{}) })
	return s, err
}

// unchanged runs fn and asserts the tree under root is byte-for-byte and
// inode-for-inode the same before and after (F17; W11 asks the same of the
// controller): size, SHA-256,
// mtime, (dev, ino) and mode of every file, and every directory listing.
func unchanged(t *testing.T, root string, fn func()) {
	t.Helper()
	before := fingerprint(t, root)
	fn()
	after := fingerprint(t, root)
	if before != after {
		t.Fatalf("the read changed the tree under %s:\nbefore:\n%s\nafter:\n%s", root, before, after)
	}
}

func fingerprint(t *testing.T, root string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		line := fmt.Sprintf("%s mode=%o size=%d mtime=%d.%d dev=%d ino=%d", rel, st.Mode, st.Size,
			st.Mtim.Sec, st.Mtim.Nsec, st.Dev, st.Ino)
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			b, err := os.ReadFile(p)
			if err == nil {
				sum := sha256.Sum256(b)
				line += " sha256=" + hex.EncodeToString(sum[:])
			} else {
				line += " unreadable"
			}
		case unix.S_IFLNK:
			target, _ := os.Readlink(p)
			line += " -> " + target
		case unix.S_IFDIR:
			ents, err := os.ReadDir(p)
			if err != nil {
				return err
			}
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			line += " [" + strings.Join(names, ",") + "]"
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// Session line builders.

const hdr = `{"type":"session","version":3,"id":"sess-1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}` + "\n"

// jsonLine encodes v as Pi's JSON.stringify does: no HTML escaping.
func jsonLine(t *testing.T, v map[string]any) string {
	t.Helper()
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func parentOf(parent string) any {
	if parent == "" {
		return nil
	}
	return parent
}

// msg is a message entry with one text block.
func msg(t *testing.T, id, parent, role, text string) string {
	t.Helper()
	m := map[string]any{"role": role, "content": []any{map[string]any{"type": "text", "text": text}}}
	return jsonLine(t, map[string]any{"type": "message", "id": id, "parentId": parentOf(parent),
		"timestamp": "2026-01-01T00:00:01.000Z", "message": m})
}

// ent is an entry of type typ with extra fields.
func ent(t *testing.T, typ, id, parent string, extra map[string]any) string {
	t.Helper()
	v := map[string]any{"type": typ, "id": id, "parentId": parentOf(parent), "timestamp": "2026-01-01T00:00:01.000Z"}
	for k, x := range extra {
		v[k] = x
	}
	return jsonLine(t, v)
}

// shown lists a page's parts as "entry" or "entry:code" for notices.
func shown(p Page) []string {
	var out []string
	for _, pt := range p.Parts {
		s := pt.Entry
		if pt.Notice != nil {
			s += ":" + pt.Notice.Code
		}
		out = append(out, s)
	}
	return out
}

// page returns every part of a branch, following cursors across pages.
func allParts(t *testing.T, s *Snapshot, branch string) []Part {
	t.Helper()
	p, err := s.Page(branch, 0)
	if err != nil {
		t.Fatalf("Page(%q): %v", branch, err)
	}
	out := p.Parts
	for p.More {
		if p, err = s.Next(p.Cursor); err != nil {
			t.Fatalf("Next: %v", err)
		}
		out = append(out, p.Parts...)
	}
	return out
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if got := protocol.CodeOf(err); got != code {
		t.Fatalf("refusal code = %q (%v), want %q", got, err, code)
	}
}

func refusal(err error) *protocol.Refusal {
	var r *protocol.Refusal
	if errors.As(err, &r) {
		return r
	}
	return nil
}
