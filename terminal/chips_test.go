package terminal

import (
	"strings"
	"testing"
)

// The composer never locks while items wait: they show as chips under it,
// ↑ selects the newest, Del cancels it, Tab puts its text in the composer
// and Enter saves the edit (Esc leaves it), ^P resumes a paused queue;
// typing while a chip is selected still composes a new prompt.
func TestChips(t *testing.T) {
	r := &screenRig{}
	r.s.SetControl(Control{"me", 1}, true)
	r.s.Chips.Set([]Chip{{ID: "qi-1", Revision: 1, State: "queued", Text: "first\nmore"}, {ID: "qi-2", Revision: 3, State: "queued", Text: "second \x1b[31m"}},
		"interrupt s-1")
	f := r.s.Render(60, 12).Plain()
	for _, want := range []string{"queue paused: interrupt s-1 (^P resumes)", "[queued r1 qi-1] first …", "[queued r3 qi-2] second ^["} {
		if !strings.Contains(f, want) {
			t.Fatalf("frame lacks %q:\n%s", want, f)
		}
	}
	r.feed("\x1b[A") // ↑: the newest chip
	if c, ok := r.s.Chips.Selected(); !ok || c.ID != "qi-2" || r.s.Notice() != ChipHelp {
		t.Fatalf("↑ selected %+v %v, notice %q", c, ok, r.s.Notice())
	}
	r.feed("\x7f")
	if len(r.actions) != 1 || r.actions[0] != ActCancelQueued {
		t.Fatalf("Del on a chip: %v; want cancel", r.actions)
	}
	r.feed("\t")
	if c, ok := r.s.Chips.Editing(); !ok || c.ID != "qi-2" || r.s.Composer.Text() != "second \x1b[31m" {
		t.Fatalf("Tab: editing %+v %v, composer %q", c, ok, r.s.Composer.Text())
	}
	r.s.Handle(Key{Kind: KeyEscape}) // a lone ESC, as the parser's flush gives it
	if _, ok := r.s.Chips.Editing(); ok || r.s.Composer.Text() != "" {
		t.Fatalf("Esc did not leave the edit: composer %q", r.s.Composer.Text())
	}
	r.feed("\t", "!", "\r")
	if a := r.actions[len(r.actions)-1]; a != ActEditQueued || len(r.sent) != 0 {
		t.Fatalf("Enter in an edit: %v, sent %q; want an edit, no prompt", a, r.sent)
	}
	r.s.EditDone()
	r.feed("\x1b[B", "\x1b[B") // past the end: no selection
	r.feed("new text", "\r")
	if len(r.sent) != 1 || r.sent[0] != "new text" {
		t.Fatalf("a prompt typed beside the chips: sent %q", r.sent)
	}
	r.feed("\x10")
	if a := r.actions[len(r.actions)-1]; a != ActResumeQueue {
		t.Fatalf("^P: %v; want resume", a)
	}
}
