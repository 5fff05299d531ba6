package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/protocol"
)

// TestConvAddBadEnginePath: a typo in --engine or --node is bad input
// like a relative --project: refused `configuration` (exit 2) with the
// flag, the value and how to find the right one, and nothing is written.
// It was an exit-1 error with no code, which docs/cli.md keeps for a
// failure before anything was decided, not for a command line's mistake.
func TestConvAddBadEnginePath(t *testing.T) {
	bin := sandboxtest.Bin(t, "mosaicctl")
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	proj := filepath.Join(home, "app")
	if err := os.MkdirAll(filepath.Join(proj, ".pi", "state", "al", "sessions"), 0o755); err != nil {
		t.Fatal(err)
	}
	base := []string{"conv", "add", "--project", proj, "--seat", "al", "--session", filepath.Join(proj, ".pi", "state", "al", "sessions", "main.jsonl")}
	for _, tc := range []struct {
		name  string
		flags []string
		fix   string
	}{
		{"no such file", []string{"--engine", filepath.Join(home, "nope", "pi")}, "`command -v pi`"},
		{"not on PATH", []string{"--engine", "pi-typo"}, "`command -v pi`"},
		{"a directory", []string{"--engine", home}, "`command -v pi`"},
		{"not a Pi install", []string{"--engine", "/bin/true"}, "point --engine at the pi executable of a @earendil-works/pi-coding-agent@0.85.1 install (`bash contrib/pi/install.sh` installs one"},
		{"node missing", []string{"--engine", "/bin/sh", "--node", filepath.Join(home, "nope", "node")}, "`command -v node`"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, bin, append(base, tc.flags...)...)
			wantRefusal(t, r, protocol.CodeConfiguration)
			if !strings.Contains(r.stderr, tc.fix) {
				t.Errorf("stderr %q; want it to name %s", r.stderr, tc.fix)
			}
			if ents, _ := os.ReadDir(filepath.Join(home, ".config", "mosaic", "conversations")); len(ents) != 0 {
				t.Fatalf("a refused conv add left %d files in the store", len(ents))
			}
		})
	}
}
