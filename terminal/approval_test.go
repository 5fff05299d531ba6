package terminal

import (
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/protocol"
)

func sel(labels ...string) protocol.Approval {
	return protocol.Approval{ID: "ap-1", Decision: "d-1", Form: protocol.FormSelect, State: protocol.ApprovalPending, Controller: "k-c",
		Title: "Allow <b>x</b>\u202e?\nforged row", Choices: labels}
}

// TestApprovalShownInert: the title and every label of a pending approval
// show exactly, with newlines, ESC and bidi controls escaped, one row
// each, so a label cannot forge another choice; the controller's digit
// picks exactly that label, y/n answer a confirm, other keys do nothing
// and never reach the composer, Esc hides; an observer's view answers
// nothing and says who may.
func TestApprovalShownInert(t *testing.T) {
	labels := []string{"Allow <i>once</i>", "multi\n2 forged", "\u202egnp.exe\u202c", "\x1b[1mbold\x1b[0m"}
	var s Screen
	s.ShowApproval(ApprovalView{Approval: sel(labels...), CanAnswer: true})
	plain := s.Render(100, 20).Plain()
	for _, want := range []string{"Allow <b>x</b><U+202E>?^Jforged row", "1: Allow <i>once</i>", "2: multi^J2 forged", "3: <U+202E>gnp.exe<U+202C>", "4: ^[[1mbold^[[0m", "1-4 answers"} {
		if !strings.Contains(plain, want) {
			t.Fatalf("screen lacks %q:\n%s", want, plain)
		}
	}
	if strings.ContainsAny(plain, "\u202e\x1b") {
		t.Fatalf("screen writes raw controls:\n%q", plain)
	}
	for _, k := range []Key{{Kind: KeyText, Text: "5"}, {Kind: KeyText, Text: "0"}, {Kind: KeyText, Text: "x"}, {Kind: KeyEnter}, {Kind: KeyText, Text: "y"}} {
		if act, _ := s.Handle(k); act != ActNone {
			t.Fatalf("key %+v: action %v", k, act)
		}
	}
	if s.Composer.Text() != "" {
		t.Fatalf("keys reached the composer: %q", s.Composer.Text())
	}
	for k, want := range map[KeyKind]Action{KeyTakeControl: ActTakeControl, KeyInterrupt: ActInterrupt, KeyForceStop: ActForceStop} {
		if act, _ := s.Handle(Key{Kind: k}); act != want {
			t.Fatalf("control key %v while an approval shows: %v, want %v", k, act, want)
		}
	}
	if act, c := s.Handle(Key{Kind: KeyText, Text: "2"}); act != ActApprove || c != labels[1] {
		t.Fatalf("2: %v %q", act, c)
	}

	cf := protocol.Approval{ID: "ap-2", Decision: "d-2", Form: protocol.FormConfirm, State: protocol.ApprovalPending, Title: "rm?", Choices: []string{"true", "false"}}
	s.ShowApproval(ApprovalView{Approval: cf, CanAnswer: true})
	if act, c := s.Handle(Key{Kind: KeyText, Text: "n"}); act != ActApprove || c != "false" {
		t.Fatalf("n: %v %q", act, c)
	}
	if act, _ := s.Handle(Key{Kind: KeyEscape}); act != ActNone || s.Approval() != nil {
		t.Fatal("Esc did not hide the approval")
	}

	s.ShowApproval(ApprovalView{Approval: sel(labels...)})
	if act, _ := s.Handle(Key{Kind: KeyText, Text: "1"}); act != ActNone {
		t.Fatalf("an observer's key answered: %v", act)
	}
	if plain := s.Render(100, 20).Plain(); !strings.Contains(plain, "read-only: only the controller (k-c) may answer") {
		t.Fatalf("observer view:\n%s", plain)
	}
}
