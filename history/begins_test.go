package history

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBegins: a snapshot begins with an earlier snapshot's bytes when
// their size and digest match its first bytes, whether it is the same
// file, one appended to, or a follow of it; a rewrite in place, a
// shorter file, a wrong digest or a size past its end do not.
func TestBegins(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	head := `{"type":"session","version":3,"id":"s-1","timestamp":"2026-12-01T00:00:00.000Z","cwd":"/p"}` + "\n"
	one := `{"type":"message","id":"a1","parentId":null,"timestamp":"2026-12-01T00:00:01.000Z","message":{"role":"user","content":"hello"}}` + "\n"
	two := `{"type":"message","id":"a2","parentId":"a1","timestamp":"2026-12-01T00:00:02.000Z","message":{"role":"user","content":"again"}}` + "\n"
	if err := os.WriteFile(path, []byte(head+one), 0o600); err != nil {
		t.Fatal(err)
	}
	first, err := Read(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(two)
	f.Close()
	followed, err := Follow(path, first, Options{})
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := Read(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	sum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	for _, s := range []*Snapshot{followed, fresh} {
		switch {
		case !s.Begins(first.Size(), first.Digest()):
			t.Fatal("an appended file does not begin with its earlier bytes")
		case !s.Begins(s.Size(), s.Digest()):
			t.Fatal("a snapshot does not begin with itself")
		case !s.Begins(0, sum("")):
			t.Fatal("a snapshot does not begin with no bytes")
		case !s.Begins(int64(len(head)), sum(head)):
			t.Fatal("a snapshot does not begin with its header line")
		case s.Begins(first.Size(), sum(head+`{"type":"message","id":"a1"`)):
			t.Fatal("a wrong digest is taken")
		case s.Begins(s.Size()+1, s.Digest()):
			t.Fatal("a size past the end is taken")
		}
	}
	forged := head + strings.Replace(one, "hello", "HELLO", 1) + two
	if err := os.WriteFile(path, []byte(forged), 0o600); err != nil {
		t.Fatal(err)
	}
	rewritten, err := Read(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rewritten.Begins(first.Size(), first.Digest()) {
		t.Fatal("a file rewritten in place begins with the bytes it no longer holds")
	}
}
