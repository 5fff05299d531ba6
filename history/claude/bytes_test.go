package claude

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"testing"
)

// TestBegins: a transcript read begins with an earlier read's bytes
// (its Size and Digest) while the file only grew; not once a byte of
// them changed, the file was replaced, or the earlier read is longer.
// Begins checks a shorter prefix against the file again, and only while
// it still holds the bytes the read parsed.
func TestBegins(t *testing.T) {
	hexOf := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	for _, tc := range []struct {
		name   string
		after  func(t *testing.T, path string) // between the reads
		before func(t *testing.T, path string) // after the second read, before Begins
		want   bool
	}{
		{name: "the same", want: true},
		{name: "grown", after: func(t *testing.T, path string) {
			appendTo(t, path, `{"type":"summary","summary":"x","leafUuid":"none"}`+"\n")
		}, want: true},
		{name: "a byte changed in place", after: func(t *testing.T, path string) {
			b, _ := os.ReadFile(path)
			b[10] ^= 1
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "grown, then changed after the read", after: func(t *testing.T, path string) {
			appendTo(t, path, `{"type":"summary","summary":"x","leafUuid":"none"}`+"\n")
		}, before: func(t *testing.T, path string) {
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt([]byte{' '}, 3); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "replaced by a copy, grown", after: func(t *testing.T, path string) {
			b, _ := os.ReadFile(path)
			if err := os.WriteFile(path+".new", b, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(path+".new", path); err != nil {
				t.Fatal(err)
			}
			appendTo(t, path, `{"type":"summary","summary":"x","leafUuid":"none"}`+"\n")
		}, before: func(t *testing.T, path string) {
			// Another inode than the second read's: its bytes are not
			// the ones it parsed.
			b, _ := os.ReadFile(path)
			if err := os.WriteFile(path+".new", b, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(path+".new", path); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref, path := setup(t, nil)
			first, err := Read(ref)
			if err != nil {
				t.Fatal(err)
			}
			orig, _ := os.ReadFile(path)
			if first.Size() != int64(len(orig)) || first.Digest() != hexOf(orig) {
				t.Fatalf("first read: %d bytes, sha256 %s; the file holds %d, %s", first.Size(), first.Digest(), len(orig), hexOf(orig))
			}
			if tc.after != nil {
				tc.after(t, path)
			}
			now, err := Read(ref)
			if err != nil {
				t.Fatal(err)
			}
			if tc.before != nil {
				tc.before(t, path)
			}
			if got := now.Begins(first.Size(), first.Digest()); got != tc.want {
				t.Fatalf("Begins = %v, want %v", got, tc.want)
			}
			if now.Begins(now.Size()+1, now.Digest()) {
				t.Fatal("a read begins with more bytes than it covered")
			}
		})
	}
	t.Run("a new session", func(t *testing.T) {
		ref, path := setup(t, nil)
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		tr, err := Read(ref)
		if err != nil || !tr.New() {
			t.Fatalf("read: %v, new %v", err, tr != nil && tr.New())
		}
		if tr.Size() != 0 || tr.Digest() != hexOf(nil) || !tr.Begins(0, hexOf(nil)) {
			t.Fatalf("a new session: %d bytes, sha256 %s", tr.Size(), tr.Digest())
		}
	})
}
