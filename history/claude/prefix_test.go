package claude

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"testing"

	"github.com/mosaic-agents/mosaic/protocol"
)

// TestReadPrefix: a prefix an earlier read vouched for is read again as
// that read parsed it, whatever was appended since; a file that no longer
// begins with exactly those bytes, or a prefix that cuts a line, is
// refused source-replaced.
func TestReadPrefix(t *testing.T) {
	hexOf := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	const more = `{"type":"summary","summary":"x","leafUuid":"none"}` + "\n"
	for _, tc := range []struct {
		name  string
		after func(t *testing.T, path string) // between the reads
		cut   int64                           // bytes off the vouched size (a cut line)
		want  bool
	}{
		{name: "the same", want: true},
		{name: "appended", after: func(t *testing.T, path string) { appendTo(t, path, more) }, want: true},
		{name: "a prompt reworded in place", after: func(t *testing.T, path string) {
			b, _ := os.ReadFile(path)
			if err := os.WriteFile(path, bytes.Replace(b, []byte("hello there"), []byte("HELLO THERE"), 1), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "a line broken in place", after: func(t *testing.T, path string) {
			b, _ := os.ReadFile(path)
			b[0] = '['
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "shortened", after: func(t *testing.T, path string) {
			b, _ := os.ReadFile(path)
			if err := os.WriteFile(path, b[:len(b)-2], 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "removed", after: func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "a prefix that cuts a line", cut: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref, path := setup(t, nil)
			first, err := Read(ref)
			if err != nil {
				t.Fatal(err)
			}
			orig, _ := os.ReadFile(path)
			size := first.Size() - tc.cut
			digest := hexOf(orig[:size])
			if tc.after != nil {
				tc.after(t, path)
			}
			got, err := ReadPrefix(ref, size, digest)
			if !tc.want {
				if protocol.CodeOf(err) != protocol.CodeSourceReplaced {
					t.Fatalf("ReadPrefix = %v; want refused %s", err, protocol.CodeSourceReplaced)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Size() != first.Size() || got.Digest() != first.Digest() || got.DefaultLeaf() != first.DefaultLeaf() || len(got.Order()) != len(first.Order()) {
				t.Fatalf("prefix read: %d bytes %s leaf %s, %d entries; the first read %d bytes %s leaf %s, %d entries",
					got.Size(), got.Digest(), got.DefaultLeaf(), len(got.Order()), first.Size(), first.Digest(), first.DefaultLeaf(), len(first.Order()))
			}
			// Following it parses what was appended, as the watch does.
			now, err := Follow(got)
			if err != nil {
				t.Fatal(err)
			}
			whole, _ := os.ReadFile(path)
			if now.Size() != int64(len(whole)) || !bytes.HasPrefix(whole, orig) {
				t.Fatalf("follow of the prefix read %d bytes; the file holds %d", now.Size(), len(whole))
			}
		})
	}
	t.Run("nothing vouched for", func(t *testing.T) {
		ref, _ := setup(t, nil)
		tr, err := ReadPrefix(ref, 0, hexOf(nil))
		if err != nil || !tr.New() {
			t.Fatalf("ReadPrefix(0) = %v, new %v; want a new session, followed from its first byte", err, tr != nil && tr.New())
		}
	})
}

// TestBefore: the bytes before an entry's line, hashed from the file
// again, are a prefix ReadPrefix reads back; a file changed in place
// since the read gives none.
func TestBefore(t *testing.T) {
	hexOf := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	ref, path := setup(t, nil)
	tr, err := Read(ref)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	for _, id := range tr.Order() {
		e, _ := tr.Entry(id)
		size, digest, ok := tr.Before(e.Line)
		want := 0
		for range e.Line - 1 {
			want += bytes.IndexByte(raw[want:], '\n') + 1
		}
		if !ok || size != int64(want) || digest != hexOf(raw[:want]) {
			t.Fatalf("before line %d: %d bytes %s ok %v; want %d bytes %s", e.Line, size, digest, ok, want, hexOf(raw[:want]))
		}
		back, err := ReadPrefix(ref, size, digest)
		if err != nil || back.Size() != size {
			t.Fatalf("ReadPrefix of the bytes before line %d: %v", e.Line, err)
		}
	}
	if err := os.WriteFile(path, bytes.Replace(raw, []byte("hello there"), []byte("HELLO THERE"), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := tr.Before(2); ok {
		t.Fatal("a prefix of a file changed in place since the read")
	}
}
