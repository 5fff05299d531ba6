package main

import (
	"testing"

	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/protocol"
)

// TestAuditableID: a well-formed id that is not registered and holds
// nothing in the journal or the claim store is refused
// unknown-conversation, instead of a clean audit of 0 entries; one removed
// with `conv rm` whose history remains is audited.
func TestAuditableID(t *testing.T) {
	_, cv := storedConversation(t, "/home/a/app", conversations.Engine{})
	for _, tc := range []struct {
		name string
		id   string
		held bool
		code string
	}{
		{"registered, nothing journaled yet", cv.ID, false, ""},
		{"registered with history", cv.ID, true, ""},
		{"unregistered, nothing held", "pi-00000000000000000000", false, protocol.CodeUnknownConv},
		{"removed, history held", "pi-00000000000000000000", true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := auditable(tc.id, tc.held)
			if got := protocol.CodeOf(err); got != tc.code || (tc.code == "") != (err == nil) {
				t.Fatalf("auditable(%s, held %v) = %v; want code %q", tc.id, tc.held, err, tc.code)
			}
		})
	}
}

// storedConversation registers, in a config home of its own, the
// conversation of seat alice on project's session main.jsonl with engine
// settings e, and returns the store and the conversation.
func storedConversation(t *testing.T, project string, e conversations.Engine) (*conversations.Store, *conversations.Conversation) {
	t.Helper()
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	s, err := conversations.Open()
	if err != nil {
		t.Fatal(err)
	}
	cv := &conversations.Conversation{Project: project, Seat: "alice", Workspace: "default",
		Session: project + "/.pi/state/alice/sessions/main.jsonl", Engine: e}
	cv.ID = conversations.ID(cv.Project, cv.Seat, "main.jsonl")
	if err := s.Save(cv); err != nil {
		t.Fatal(err)
	}
	return s, cv
}
