package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/mosaic-agents/mosaic/protocol"
)

// TestProofFile: --proof FILE is created 0600 whatever the umask, replaces
// a regular file whole (never writing through a hard link), refuses a
// symlink (dangling or not) and anything but a regular file, and never
// leaves a temp file behind.
func TestProofFile(t *testing.T) {
	old := syscall.Umask(0)
	t.Cleanup(func() { syscall.Umask(old) })
	proof := []byte(`{"type":"cohort"}` + "\n")
	tests := []struct {
		name  string
		setup func(t *testing.T, dir, file string) // what is at FILE before
		code  string                               // "" = written
		says  string                               // in the refusal
		check func(t *testing.T, dir, file string)
	}{
		{name: "new file", check: func(t *testing.T, dir, file string) {}},
		{name: "existing regular file replaced, hard link untouched",
			setup: func(t *testing.T, dir, file string) {
				must(t, os.WriteFile(file, []byte("old"), 0o644))
				must(t, os.Link(file, filepath.Join(dir, "other-name")))
			},
			check: func(t *testing.T, dir, file string) {
				if b, _ := os.ReadFile(filepath.Join(dir, "other-name")); string(b) != "old" {
					t.Errorf("the hard link's content became %q; the proof was written through it", b)
				}
			}},
		{name: "symlink to a file", code: protocol.CodeProofFileSymlink,
			setup: func(t *testing.T, dir, file string) {
				must(t, os.WriteFile(filepath.Join(dir, "victim"), []byte("keep"), 0o644))
				must(t, os.Symlink(filepath.Join(dir, "victim"), file))
			},
			check: func(t *testing.T, dir, file string) {
				if b, _ := os.ReadFile(filepath.Join(dir, "victim")); string(b) != "keep" {
					t.Errorf("the symlink's target became %q", b)
				}
			}},
		{name: "dangling symlink", code: protocol.CodeProofFileSymlink,
			setup: func(t *testing.T, dir, file string) { must(t, os.Symlink(filepath.Join(dir, "new-victim"), file)) },
			check: func(t *testing.T, dir, file string) {
				if _, err := os.Lstat(filepath.Join(dir, "new-victim")); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("the dangling symlink's target was created: %v", err)
				}
			}},
		{name: "directory", code: protocol.CodeProofFile, says: "is a directory, not a regular file; name another file, e.g. `--proof ",
			setup: func(t *testing.T, dir, file string) { must(t, os.Mkdir(file, 0o700)) }},
		{name: "fifo", code: protocol.CodeProofFile, says: "is a named pipe, not a regular file",
			setup: func(t *testing.T, dir, file string) { must(t, syscall.Mkfifo(file, 0o600)) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, via := range []string{"check", "write"} {
				t.Run(via, func(t *testing.T) {
					dir := t.TempDir()
					file := filepath.Join(dir, "proof.json")
					if tc.setup != nil {
						tc.setup(t, dir, file)
					}
					var err error
					if via == "check" {
						if err = checkProofFile(file); err == nil && tc.code == "" {
							err = writeProofFile(file, proof)
						}
					} else {
						err = writeProofFile(file, proof) // FILE changed after the check
					}
					var r *protocol.Refusal
					switch {
					case tc.code == "" && err != nil:
						t.Fatalf("refused: %v", err)
					case tc.code != "" && (!errors.As(err, &r) || r.Code != tc.code):
						t.Fatalf("err %v; want refusal %s", err, tc.code)
					case tc.code != "" && !strings.Contains(r.Message, "name another file"):
						t.Errorf("the refusal %q does not name the fix", r.Message)
					case tc.code != "" && !strings.Contains(r.Message, tc.says):
						t.Errorf("the refusal %q does not say %q", r.Message, tc.says)
					case tc.code == "":
						fi, err := os.Lstat(file)
						must(t, err)
						if b, _ := os.ReadFile(file); string(b) != string(proof) || fi.Mode() != 0o600 {
							t.Errorf("FILE %q mode %v; want the proof, mode 0600", b, fi.Mode())
						}
					}
					if tc.check != nil {
						tc.check(t, dir, file)
					}
					ents, _ := os.ReadDir(dir)
					for _, e := range ents {
						if strings.Contains(e.Name(), ".tmp-") {
							t.Errorf("temp file %s left behind", e.Name())
						}
					}
				})
			}
		})
	}
}

func TestProofFileMissingDirectory(t *testing.T) {
	file := filepath.Join(t.TempDir(), "no-such-dir", "proof.json")
	for _, err := range []error{checkProofFile(file), writeProofFile(file, []byte("x"))} {
		var r *protocol.Refusal
		if !errors.As(err, &r) || r.Code != protocol.CodeProofFile {
			t.Errorf("err %v; want refusal %s", err, protocol.CodeProofFile)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
