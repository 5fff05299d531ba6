package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/protocol"
)

// TestTakenSeatClaudeAdvice: README's Claude `conv add`, run a second
// time with the same flags, chooses a new session and finds the seat
// taken by the conversation it added the first time. The refusal names
// that conversation as the one to keep (and how its settings change, by
// its session) and never Pi's --session, which a Claude conversation
// refuses; a Pi conversation's refusal still names --session.
func TestTakenSeatClaudeAdvice(t *testing.T) {
	root := t.TempDir()
	project := filepath.Join(root, "proj")
	if err := os.MkdirAll(project, 0o755); err != nil {
		t.Fatal(err)
	}
	claudeOn := func(session string) *conversations.Conversation {
		return &conversations.Conversation{
			ID: conversations.ID(project, "me", session), Project: project, Seat: "me", Workspace: conversations.DefaultWorkspace,
			EngineKind: engine.KindClaude,
			Claude: &conversations.Claude{Path: "/opt/claude/bin/claude", Version: "2.1.328", SHA256: strings.Repeat("ab", 32),
				Session: session},
		}
	}
	s := &conversations.Store{Dir: filepath.Join(root, "conversations")}
	first := claudeOn("11111111-2222-4333-8444-555555555555")
	if err := s.Save(first); err != nil {
		t.Fatal(err)
	}
	err := refuseTakenSeat(s, claudeOn("66666666-7777-4888-8999-aaaaaaaaaaaa"))
	if protocol.CodeOf(err) != protocol.CodeConfiguration {
		t.Fatalf("a second Claude conversation on the seat: %v, want configuration", err)
	}
	msg := err.Error()
	for _, want := range []string{"`mosaicctl conv show " + first.ID + "`", "--resume-session " + first.Claude.Session + " --replace", "`mosaicctl conv rm " + first.ID + "`", "--seat NAME"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the refusal does not name %q: %s", want, msg)
		}
	}
	if strings.Contains(msg, "--session") && !strings.Contains(msg, "--resume-session") || strings.Contains(msg, ".pi/state") {
		t.Errorf("the refusal of a Claude conversation names Pi's --session: %s", msg)
	}

	pi := &conversations.Conversation{Project: project, Seat: "me", Workspace: conversations.DefaultWorkspace,
		Session: conversations.SessionPath(project, "me", "")}
	pi.ID = conversations.ID(project, "me", pi.Session)
	if err := refuseTakenSeat(s, pi); err == nil || !strings.Contains(err.Error(), "its --session under") {
		t.Errorf("a Pi conversation on the seat: %v, want the --session advice", err)
	}
}
