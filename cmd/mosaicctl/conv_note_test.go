package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/engine"
)

// TestEnvFileNoteNamesRunnableDoctor: conv add's note on an env file no
// engine masks, where mosaic's configuration directory is not masked
// either (here it is no directory), names the doctor check as a command that
// runs: `mosaicctl doctor` takes no arguments, so `mosaicctl doctor
// env-files` is refused usage.
func TestEnvFileNoteNamesRunnableDoctor(t *testing.T) {
	root := t.TempDir()
	t.Setenv("HOME", root)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(root, "cfg"))
	if err := os.MkdirAll(filepath.Join(root, "cfg"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "cfg", "mosaic"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	project := filepath.Join(root, "proj")
	if err := os.MkdirAll(project, 0o755); err != nil {
		t.Fatal(err)
	}
	env := filepath.Join(root, "elsewhere", "claude.env")
	session := "11111111-2222-4333-8444-555555555555"
	cv := &conversations.Conversation{
		ID: conversations.ID(project, "me", session), Project: project, Seat: "me", Workspace: conversations.DefaultWorkspace,
		EngineKind: engine.KindClaude,
		Claude: &conversations.Claude{Path: "/opt/claude/bin/claude", Version: "2.1.328", SHA256: strings.Repeat("ab", 32),
			Session: session, EnvFile: env},
	}
	s := &conversations.Store{Dir: filepath.Join(root, "conversations")}
	if err := s.Save(cv); err != nil {
		t.Fatal(err)
	}
	var w bytes.Buffer
	noteEnvFileReach(&w, s, cv)
	if !strings.Contains(w.String(), "`mosaicctl doctor`") || strings.Contains(w.String(), "`mosaicctl doctor env-files`") {
		t.Fatalf("the note does not name `mosaicctl doctor` as it runs: %q", w.String())
	}
}
