package owner

import (
	"os"
	"path/filepath"
	"testing"
)

func TestBeyondUser(t *testing.T) {
	dir := t.TempDir()
	own := filepath.Join(dir, "prog")
	if err := os.WriteFile(own, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "sh")
	if err := os.Symlink("/bin/sh", link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		want       bool
	}{
		{"own file", own, os.Getuid() == 0}, // beyond the user only for root
		{"root's program", "/bin/sh", true},
		{"link to root's program", link, true}, // what runs is the target
		{"directory", dir, false},
		{"missing", filepath.Join(dir, "none"), false},
		{"relative", "sh", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := BeyondUser(tc.path); got != tc.want {
				t.Errorf("BeyondUser(%s) = %v, want %v", tc.path, got, tc.want)
			}
		})
	}
}

// TestRootOnly: only root's files, under root's directories, qualify,
// whoever asks: a user's own file never does, even for a root caller
// (install --global run with sudo).
func TestRootOnly(t *testing.T) {
	own := filepath.Join(t.TempDir(), "prog")
	if err := os.WriteFile(own, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Getuid() == 0 {
		if err := os.Chown(own, 1000, 1000); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name, path string
		want       bool
	}{
		{"a user's file", own, false},
		{"root's program", "/bin/sh", true},
		{"missing", own + ".none", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := RootOnly(tc.path); got != tc.want {
				t.Errorf("RootOnly(%s) = %v, want %v", tc.path, got, tc.want)
			}
		})
	}
}
