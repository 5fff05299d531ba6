package terminal

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/protocol"
)

// rig is a screen loop without a screen: it feeds input chunks through a
// Parser into a Composer and records every text the terminal would send.
type rig struct {
	p          Parser
	c          Composer
	controller bool
	sent       []string
	refusals   []error
}

func (r *rig) feed(chunks ...string) {
	for _, ch := range chunks {
		for _, k := range r.p.Feed([]byte(ch)) {
			send, ok, err := r.c.Handle(k, r.controller)
			if ok {
				r.sent = append(r.sent, send)
			}
			if err != nil {
				r.refusals = append(r.refusals, err)
			}
		}
	}
}

func TestComposerEmptyAtStartAndClearedAfterSubmit(t *testing.T) {
	r := &rig{controller: true}
	if r.c.Text() != "" {
		t.Fatal("composer not empty at start")
	}
	r.feed("one\rtwo", "\rthree")
	if want := []string{"one", "two"}; !reflect.DeepEqual(r.sent, want) {
		t.Fatalf("sent %q, want %q", r.sent, want)
	}
	if r.c.Text() != "three" {
		t.Fatalf("composer %q, want the text after the last Enter", r.c.Text())
	}
}

// Enter takes the composer at that key: text after it in the same chunk
// starts the next message.
func TestEnterTakesTheComposerAtThatKey(t *testing.T) {
	r := &rig{controller: true}
	r.feed("first\rsecond\x1b\rline\rthird")
	if want := []string{"first", "second\nline"}; !reflect.DeepEqual(r.sent, want) {
		t.Fatalf("sent %q, want %q", r.sent, want)
	}
	if r.c.Text() != "third" {
		t.Fatalf("composer %q", r.c.Text())
	}
}

// S4: a / left from an abandoned edit does not survive a control transfer
// away and back; the next submit sends exactly the new text.
func TestS4ComposerClearedOnControlTransfer(t *testing.T) {
	me, other := "conn-me", "conn-other"
	r := &rig{controller: true}
	r.c.SetControl(Control{me, 1})
	r.feed("/")
	if r.c.Text() != "/" {
		t.Fatalf("composer %q", r.c.Text())
	}
	r.controller = false
	if !r.c.SetControl(Control{other, 2}) {
		t.Error("transfer away did not report clearing")
	}
	r.controller = true
	r.c.SetControl(Control{me, 3})
	if r.c.Text() != "" {
		t.Fatalf("composer after transfer away and back = %q, want empty", r.c.Text())
	}
	r.feed("hello\r")
	if want := []string{"hello"}; !reflect.DeepEqual(r.sent, want) {
		t.Fatalf("sent %q, want exactly %q", r.sent, want)
	}
}

func TestComposerClearedOnEveryControlChange(t *testing.T) {
	cases := []struct {
		name   string
		from   Control
		to     Control
		clears bool
	}{
		{"same control", Control{"a", 1}, Control{"a", 1}, false},
		{"generation only", Control{"a", 1}, Control{"a", 2}, true},
		{"controller only", Control{"a", 1}, Control{"b", 1}, true},
		{"controller left", Control{"a", 1}, Control{"", 1}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var k Composer
			k.SetControl(c.from)
			k.Insert("draft")
			if got := k.SetControl(c.to); got != c.clears || (k.Text() == "") != c.clears {
				t.Fatalf("SetControl reported %v, text %q; want clears=%v", got, k.Text(), c.clears)
			}
		})
	}
	var k Composer
	k.Insert("typed before the first welcome")
	if !k.SetControl(Control{"a", 1}) || k.Text() != "" {
		t.Fatal("the first control (from unknown) must clear too")
	}
}

// S5: an observer gets a paste and then Enter, as send-message.sh does:
// nothing is sent, the reason is not-controller, the text is kept.
func TestS5ObserverPasteAndEnterSendsNothing(t *testing.T) {
	r := &rig{controller: false}
	r.feed("\x1b[200~/goal x\nsecond line\x1b[201~", "\r")
	if len(r.sent) != 0 {
		t.Fatalf("observer sent %q", r.sent)
	}
	if len(r.refusals) != 1 || !errors.Is(r.refusals[0], ErrNotController) {
		t.Fatalf("refusals %v, want one not-controller", r.refusals)
	}
	var ref *Refusal
	if !errors.As(r.refusals[0], &ref) || ref.Code != "not-controller" {
		t.Fatalf("refusal code %v", r.refusals[0])
	}
	if r.c.Text() != "/goal x\nsecond line" {
		t.Fatalf("text not kept: %q", r.c.Text())
	}
	if r.c.Notice() != "not admitted: you are an observer; Ctrl-T takes control" {
		t.Fatalf("notice %q", r.c.Notice())
	}
}

// A paste never submits by itself, whatever it holds, even when its
// markers are split right after the ESC.
func TestPasteNeverSubmits(t *testing.T) {
	in := "\x1b[200~a\rb\r\nc\x04\x03\x14\x1b[201~"
	splits([]byte(in), func(chunks [][]byte) {
		r := &rig{controller: true}
		for _, ch := range chunks {
			r.feed(string(ch))
		}
		if len(r.sent) != 0 || r.c.Text() != "a\rb\r\nc\x04\x03\x14" {
			t.Fatalf("chunks %q: sent %q, composer %q", chunks, r.sent, r.c.Text())
		}
	})
}

// S7: text with ESC, bracketed-paste markers and U+2028 is submitted
// verbatim, as one string.
func TestS7VerbatimSubmit(t *testing.T) {
	pasted := "a\x1b[31mred\x1b[0m \x1b[200~inner\u2028line\u2029\r\nend\x1b"
	r := &rig{controller: true}
	r.feed("typed \u2028", "\x1b[200~"+pasted[:9], pasted[9:]+"\x1b[20", "1~ tail\r")
	want := "typed \u2028" + pasted + " tail"
	if !reflect.DeepEqual(r.sent, []string{want}) {
		t.Fatalf("sent %q, want [%q]", r.sent, want)
	}
	// The end marker itself cannot arrive inside a paste, but inserted
	// text holding it is still sent verbatim.
	var c Composer
	c.Insert("x\x1b[201~y\x1b[200~")
	if got, err := c.Submit(true); err != nil || got != "x\x1b[201~y\x1b[200~" {
		t.Fatalf("Submit = %q, %v", got, err)
	}
}

func TestInvalidUTF8IsShownAsSent(t *testing.T) {
	var c Composer
	c.Insert("a\xff\xfeb")
	if c.Text() != "a\uFFFD\uFFFDb" {
		t.Fatalf("text %q", c.Text())
	}
}

// A lost outcome says so and offers no resend: the composer kept no copy.
func TestLostOutcomeOffersNoResend(t *testing.T) {
	r := &rig{controller: true}
	r.feed("do the thing\r")
	r.c.Settle(Outcome{Kind: Lost})
	if r.c.Notice() != OutcomeUnknown || OutcomeUnknown != "outcome unknown, check the transcript" {
		t.Fatalf("notice %q", r.c.Notice())
	}
	if r.c.Text() != "" {
		t.Fatalf("composer holds %q after a lost outcome", r.c.Text())
	}
	r.feed("\r")
	if len(r.sent) != 1 || len(r.refusals) != 1 || !errors.Is(r.refusals[0], ErrEmpty) {
		t.Fatalf("Enter after a lost outcome: sent %q, refusals %v", r.sent, r.refusals)
	}
	r.c.Settle(Outcome{Kind: Refused, Code: "busy"})
	if r.c.Notice() != "refused: busy" {
		t.Fatalf("notice %q", r.c.Notice())
	}
}

func TestComposerEditing(t *testing.T) {
	r := &rig{controller: true}
	r.feed("héllo\x7f\x7f\x08", "\n漢\x7f字")
	if r.c.Text() != "hé\n字" {
		t.Fatalf("text %q", r.c.Text())
	}
	var empty Composer
	empty.Backspace()
	if empty.Text() != "" {
		t.Fatal("backspace on empty")
	}
	r.c.Insert("\x1b[2J\u202e")
	got := strings.Join(r.c.Lines(40), "|")
	if got != "> hé|  字^[[2J<U+202E>" {
		t.Fatalf("Lines = %q", got)
	}
}

func TestStatusLine(t *testing.T) {
	s := Status{Conversation: "conv\n1", Controller: true, Generation: 3, Engine: "idle", Binding: "bound", Replay: "seq 1-40", Notice: OutcomeUnknown}
	want := "conv^J1 | controller | gen 3 | engine idle | binding bound | replay seq 1-40 | outcome unknown, check the transcript"
	if got := s.Line(0); got != want {
		t.Fatalf("Line = %q", got)
	}
	if got := s.Line(20); Width(got) > 20 || !strings.HasSuffix(got, "…") {
		t.Fatalf("Line(20) = %q", got)
	}
	if got := (Status{Conversation: "c"}).Line(80); got != "c | observer | gen 0" {
		t.Fatalf("observer line %q", got)
	}
}

func TestDialogRowsStayOneLine(t *testing.T) {
	d := Dialog{
		Title:    "force stop conv-1",
		Facts:    [][2]string{{"execution", "x7"}, {"members", "pid 12 node\n  pid 99 forged\x1b[2K"}},
		Question: "force stop? type yes to confirm",
	}
	want := []string{"== force stop conv-1 ==", "  execution: x7", "  members: pid 12 node^J  pid 99 forged^[[2K", "force stop? type yes to confirm"}
	if got := d.Lines(0); !reflect.DeepEqual(got, want) {
		t.Fatalf("Lines = %q", got)
	}
	for _, l := range d.Lines(16) {
		if Width(l) > 16 {
			t.Fatalf("line %q too wide", l)
		}
	}
}

// TestComposerKeepsWhatThePolicyRefuses (mutant 316): Enter on a text the
// text policy refuses (a first visible slash) sends nothing and keeps the
// text, with the controller's own code and message, so it can be fixed;
// sent, the controller refused it after the buffer was cleared.
func TestComposerKeepsWhatThePolicyRefuses(t *testing.T) {
	for _, text := range []string{"/help", "  /goal ship it"} {
		t.Run(text, func(t *testing.T) {
			r := &rig{controller: true}
			r.feed(text, "\r")
			var ref *Refusal
			if len(r.refusals) != 1 || !errors.As(r.refusals[0], &ref) || ref.Code != protocol.CodeTextPolicy {
				t.Fatalf("Enter on %q: refusals %v; want one %s", text, r.refusals, protocol.CodeTextPolicy)
			}
			if r.c.Text() != text || len(r.sent) != 0 {
				t.Fatalf("composer %q, sent %q; want the text kept and nothing sent", r.c.Text(), r.sent)
			}
			if !strings.Contains(r.c.Notice(), "put a word or a quote before the slash") {
				t.Fatalf("notice %q does not name the fix", r.c.Notice())
			}
		})
	}
}
