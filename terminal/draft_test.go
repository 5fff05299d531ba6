package terminal

import (
	"reflect"
	"strings"
	"testing"
)

// TestTakingControlKeepsTheDraft: what an observer typed survives taking
// control as a draft, is never sent by the transfer, and comes back with
// one key; Enter then sends exactly it.
func TestTakingControlKeepsTheDraft(t *testing.T) {
	r := &screenRig{}
	r.s.SetControl(Control{"someone", 1}, false)
	r.feed("explain the build", "\r") // refused as an observer; kept
	if r.s.Composer.Text() != "explain the build" || len(r.sent) != 0 {
		t.Fatalf("observer Enter: composer %q, sent %q", r.s.Composer.Text(), r.sent)
	}
	r.s.SetControl(Control{"me", 2}, true)
	if r.s.Composer.Text() != "" || r.s.Composer.Draft() != "explain the build" || len(r.sent) != 0 {
		t.Fatalf("after taking control: composer %q, draft %q, sent %q; want an empty composer, the text kept, nothing sent",
			r.s.Composer.Text(), r.s.Composer.Draft(), r.sent)
	}
	if !strings.Contains(r.s.Notice(), DraftKey+" restores") {
		t.Fatalf("the notice %q does not say how to restore the draft", r.s.Notice())
	}
	r.feed("\x19") // Ctrl-Y
	if r.s.Composer.Text() != "explain the build" || r.s.Composer.Draft() != "" || len(r.sent) != 0 {
		t.Fatalf("after Ctrl-Y: composer %q, draft %q, sent %q", r.s.Composer.Text(), r.s.Composer.Draft(), r.sent)
	}
	r.feed(" please\r")
	if want := []string{"explain the build please"}; !reflect.DeepEqual(r.sent, want) {
		t.Fatalf("sent %q, want %q", r.sent, want)
	}
	r.feed("\x19")
	if r.s.Composer.Text() != "" || r.s.Notice() != "no draft to restore" {
		t.Fatalf("Ctrl-Y without a draft: composer %q, notice %q", r.s.Composer.Text(), r.s.Notice())
	}
}

// TestDraftNeverPrefixesTheNextSubmit is S4 with the draft: a "/" left
// from an abandoned edit is kept aside over transfers away and back, the
// next submit sends exactly the new text, and two cleared texts are both
// kept.
func TestDraftNeverPrefixesTheNextSubmit(t *testing.T) {
	r := &screenRig{}
	r.s.SetControl(Control{"me", 1}, true)
	r.feed("/")
	r.s.SetControl(Control{"other", 2}, false)
	r.feed("second")
	r.s.SetControl(Control{"me", 3}, true)
	r.feed("hello\r")
	if want := []string{"hello"}; !reflect.DeepEqual(r.sent, want) {
		t.Fatalf("sent %q, want exactly %q", r.sent, want)
	}
	if got := r.s.Composer.Draft(); got != "/\nsecond" {
		t.Fatalf("draft %q, want both cleared texts", got)
	}
}

// TestLegendOnQuestionMark: ? on an empty composer shows the key legend
// and types nothing; a second ? types it and puts the legend away; ?
// inside text is text.
func TestLegendOnQuestionMark(t *testing.T) {
	r := &screenRig{}
	r.s.SetControl(Control{"me", 1}, true)
	r.feed("?")
	if r.s.Notice() != Legend || r.s.Composer.Text() != "" {
		t.Fatalf("? on an empty composer: notice %q, composer %q", r.s.Notice(), r.s.Composer.Text())
	}
	for _, k := range []string{"Ctrl-T", "Ctrl-Y", "Ctrl-G", "Ctrl-X", "Ctrl-R", "Ctrl-C"} {
		if !strings.Contains(Legend, "^"+k[len(k)-1:]) {
			t.Errorf("the legend %q does not name %s", Legend, k)
		}
	}
	r.feed("?")
	if r.s.Composer.Text() != "?" || r.s.Notice() != "" {
		t.Fatalf("a second ?: composer %q, notice %q; want ? and the legend put away", r.s.Composer.Text(), r.s.Notice())
	}
	r.feed("?")
	if r.s.Composer.Text() != "??" {
		t.Fatalf("? after text: composer %q", r.s.Composer.Text())
	}
}

// TestDraftHintOutlivesTheNotice: the status line says how to restore a
// kept draft after later notices replace the control change's.
func TestDraftHintOutlivesTheNotice(t *testing.T) {
	r := &screenRig{}
	r.s.SetControl(Control{"other", 1}, false)
	r.feed("typed")
	r.s.SetControl(Control{"me", 2}, true)
	r.s.SetNotice("took control at generation 2")
	f := r.s.Render(120, 10)
	if f.StatusRow < 0 || !strings.HasSuffix(f.Lines[f.StatusRow], " | draft kept (Ctrl-Y)") || !strings.Contains(f.Plain(), "took control at generation 2") {
		t.Fatalf("the frame does not say how to restore the draft:\n%s", f.Plain())
	}
	r.feed("\x19")
	if f := r.s.Render(120, 10); strings.Contains(f.Plain(), "draft kept") {
		t.Fatalf("the hint stays after the draft was restored:\n%s", f.Plain())
	}
}
