package scopes

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestReplaceableLinks: a link on the way to a path, in a directory the
// user owns, is named, wherever on the way it is; a path without one
// names nothing.
func TestReplaceableLinks(t *testing.T) {
	home := t.TempDir()
	real := filepath.Join(home, "dotfiles", "config")
	if err := os.MkdirAll(filepath.Join(real, "mosaic"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(home, ".config")
	if err := os.Symlink(real, cfg); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(home, ".local", "state", "mosaic")
	if err := os.MkdirAll(plain, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		paths []string
		want  []string
	}{
		{"link above", []string{filepath.Join(cfg, "mosaic")}, []string{cfg}},
		{"missing below a link", []string{filepath.Join(cfg, "systemd", "user")}, []string{cfg}},
		{"no link", []string{plain}, nil},
		{"each once", []string{filepath.Join(cfg, "mosaic"), filepath.Join(cfg, "systemd"), plain}, []string{cfg}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ReplaceableLinks(tc.paths...); !slices.Equal(got, tc.want) {
				t.Errorf("ReplaceableLinks(%v) = %v, want %v", tc.paths, got, tc.want)
			}
		})
	}
}
