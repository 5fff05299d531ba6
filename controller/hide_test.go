package controller

import (
	"os"
	"path/filepath"
	"testing"
)

// TestBinaryDirHidden: the directory of a controller binary the user can
// replace is hidden, wherever it is (install's copy under an
// XDG_STATE_HOME the controller's environment does not name); root's
// /bin/sh needs nothing hidden.
func TestBinaryDirHidden(t *testing.T) {
	if os.Getuid() == 0 {
		t.Skip("root's own files count as beyond the user: run as a user (make test does, in the sandbox)")
	}
	dir := filepath.Join(t.TempDir(), "alt-state", "mosaic", "bin")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "mosaicctl")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	if got := binaryDir(exe); got != dir {
		t.Errorf("binaryDir(%s) = %q, want %s", exe, got, dir)
	}
	if got := binaryDir("/bin/sh"); got != "" {
		t.Errorf("binaryDir(/bin/sh) = %q, want nothing", got)
	}
}
