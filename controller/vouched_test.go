package controller

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/mosaic-agents/mosaic/claims"
)

// TestHistoryChange: the session file compared with the bytes a stopped
// revision vouched for: the same bytes, bytes appended (a line without
// its LF too: Pi loads it), bytes rewritten in place with the size, the
// header and the leaf kept, a shorter file, a missing one. A revision
// that recorded nothing (an older mosaic's) is always the same: the
// header and leaf checks are all there is, as before.
func TestHistoryChange(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.jsonl")
	writeSession(t, path, "/p", 4)
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	head, err := readSessionHead(path)
	if err != nil {
		t.Fatal(err)
	}
	rec := &claims.Record{Vouched: fileState(head.snap)}
	if rec.Vouched.Size != int64(len(orig)) {
		t.Fatalf("vouched %d bytes of %d", rec.Vouched.Size, len(orig))
	}
	for _, tc := range []struct {
		name string
		data []byte // nil: no file
		want string
	}{
		{"the same bytes", orig, historySame},
		{"an entry appended", append(bytes.Clone(orig), []byte(`{"type":"message","id":"x1","parentId":"m00003","timestamp":"2026-12-01T00:00:02.000Z","message":{"role":"user","content":[{"type":"text","text":"forged"}]}}`+"\n")...), historyAppended},
		{"a line without its LF", append(bytes.Clone(orig), []byte(`{"type":"message","id":"x1"`)...), historyAppended},
		{"rewritten in place", bytes.Replace(orig, []byte("message 0"), []byte("FORGED!!!"), 1), historyRewritten},
		{"shortened", orig[:bytes.Index(orig, []byte(`{"type":"message","id":"m00003"`))], historyRewritten},
		{"missing", nil, historyRewritten},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(path)
			if tc.data != nil {
				if err := os.WriteFile(path, tc.data, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			h, err := readSessionHead(path)
			if err != nil {
				t.Fatal(err)
			}
			if tc.name == "rewritten in place" && (h.leaf != head.leaf || h.id != head.id || h.snap.Size() != head.snap.Size()) {
				t.Fatalf("the rewrite changed the header, leaf or size: the test is not about a rewrite in place")
			}
			if got := historyChange(rec, h); got != tc.want {
				t.Fatalf("change %q, want %q", got, tc.want)
			}
			if got := historyChange(&claims.Record{}, h); got != historySame {
				t.Fatalf("a revision that recorded nothing: change %q, want none", got)
			}
		})
	}
	// A stop that vouched for no file: one appearing since holds bytes
	// after none (the engine's lazy first write after the last check, or
	// another writer's).
	none := &claims.Record{Vouched: fileState(nil)}
	os.Remove(path)
	if h, err := readSessionHead(path); err != nil || historyChange(none, h) != historySame {
		t.Fatalf("no file, none vouched: %v %q", err, historyChange(none, h))
	}
	os.WriteFile(path, orig, 0o600)
	if h, _ := readSessionHead(path); historyChange(none, h) != historyAppended {
		t.Fatalf("a file where none was vouched: change %q", historyChange(none, h))
	}
}
