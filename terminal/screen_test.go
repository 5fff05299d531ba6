package terminal

import (
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/client"
	"github.com/mosaic-agents/mosaic/history"
	"github.com/mosaic-agents/mosaic/protocol"
)

// screenRig feeds input chunks through a Parser into a Screen and keeps
// what the loop would act on.
type screenRig struct {
	p       Parser
	s       Screen
	sent    []string
	actions []Action
}

func (r *screenRig) feed(chunks ...string) {
	for _, ch := range chunks {
		for _, k := range r.p.Feed([]byte(ch)) {
			a, text := r.s.Handle(k)
			if a == ActSend {
				r.sent = append(r.sent, text)
			}
			if a != ActNone {
				r.actions = append(r.actions, a)
			}
		}
	}
}

func notices(n int) *Transcript {
	t := &Transcript{}
	for i := range n {
		t.AddNotice(fmt.Sprintf("n%d", i))
	}
	return t
}

// checkFrame fails unless f has exactly h lines of at most w cells, none
// with a raw control character.
func checkFrame(t *testing.T, f Frame, w, h int) {
	t.Helper()
	if len(f.Lines) != h {
		t.Fatalf("%d lines, want %d:\n%s", len(f.Lines), h, f.Plain())
	}
	for _, l := range f.Lines {
		if Width(l) > w {
			t.Fatalf("line %q is %d cells, wider than %d", l, Width(l), w)
		}
		for _, r := range l {
			if _, esc := Escape(r); esc {
				t.Fatalf("line %q holds the raw character %U", l, r)
			}
		}
	}
	if f.CursorRow < 0 || f.CursorRow >= h || f.CursorCol < 0 || f.CursorCol >= w {
		t.Fatalf("cursor %d,%d outside %dx%d", f.CursorRow, f.CursorCol, w, h)
	}
}

func TestScreenLayout(t *testing.T) {
	r := &screenRig{}
	r.s.Transcript = notices(3)
	r.s.Status = Status{Conversation: "c1", Generation: 2, Engine: "idle", Binding: "active"}
	r.s.SetNotice("a notice\x1b[2J")
	f := r.s.Render(40, 8)
	checkFrame(t, f, 40, 8)
	want := []string{"-- n0 --", "-- n1 --", "-- n2 --", "", "", "c1 | observer | gen 2 | binding active", "a notice^[[2J", "> "}
	if !reflect.DeepEqual(f.Lines, want) {
		t.Fatalf("frame\n%q\nwant\n%q", f.Lines, want)
	}
	if f.CursorRow != 7 || f.CursorCol != 2 {
		t.Fatalf("cursor %d,%d; want after the prompt", f.CursorRow, f.CursorCol)
	}
	r.feed("hi")
	if f := r.s.Render(40, 8); f.Lines[7] != "> hi" || f.CursorCol != 4 {
		t.Fatalf("composer row %q cursor %d", f.Lines[7], f.CursorCol)
	}
	// A long composer shows its last lines, at most a third of the screen.
	r.feed(strings.Repeat("\n", 9) + "last")
	f = r.s.Render(40, 9)
	checkFrame(t, f, 40, 9)
	if got := f.Lines[6:]; !reflect.DeepEqual(got, []string{"  … 8 more lines", "  ", "  last"}) {
		t.Fatalf("composer rows %q", got)
	}
	if f.CursorRow != 8 || f.CursorCol != 6 {
		t.Fatalf("cursor %d,%d", f.CursorRow, f.CursorCol)
	}
}

func TestScreenFitsEverySize(t *testing.T) {
	r := &screenRig{}
	tr := notices(5)
	tr.AddHistory(HistoryMessage{Role: "assistant", Content: []protocol.Block{text("wide 漢字漢字 and bidi \u202e and ESC \x1b[2J " + strings.Repeat("x", 50))}})
	r.s.Transcript = tr
	r.s.Status = Status{Conversation: "conv", Binding: "active\nforged"}
	r.feed("text \x1b[200~with\npaste\x1b[201~")
	for w := 1; w <= 30; w++ {
		for h := 1; h <= 12; h++ {
			checkFrame(t, r.s.Render(w, h), w, h)
		}
	}
	r.s.OpenDialog(Dialog{Title: "t", Facts: [][2]string{{"intent", strings.Repeat("kill ", 20)}}, Question: "y?"})
	for w := 1; w <= 30; w++ {
		for h := 1; h <= 12; h++ {
			checkFrame(t, r.s.Render(w, h), w, h)
		}
	}
}

func TestScreenScroll(t *testing.T) {
	r := &screenRig{}
	r.s.Transcript = notices(20)
	r.s.Render(20, 8) // 5 transcript rows
	first := func() string { return r.s.Render(20, 8).Lines[0] }
	if got := first(); got != "-- n15 --" {
		t.Fatalf("following: first row %q", got)
	}
	r.feed("\x1b[5~")
	if got := first(); got != "-- n11 --" {
		t.Fatalf("after PageUp: first row %q", got)
	}
	if st := r.s.Render(60, 8).Lines[5]; !strings.Contains(st, "lines 12-16 of 20") {
		t.Fatalf("status while scrolled %q", st)
	}
	// New lines while scrolled keep the reading position.
	r.s.Transcript.AddNotice("n20")
	if got := first(); got != "-- n11 --" {
		t.Fatalf("after new lines: first row %q", got)
	}
	r.feed("\x1b[5~\x1b[5~\x1b[5~\x1b[5~\x1b[5~")
	if got := first(); got != "-- n0 --" {
		t.Fatalf("at the top: first row %q", got)
	}
	r.feed("\x1b[6~\x1b[6~\x1b[6~\x1b[6~\x1b[6~\x1b[6~")
	if got := first(); got != "-- n16 --" {
		t.Fatalf("back at the end: first row %q", got)
	}
	r.s.Transcript.AddNotice("n21")
	if got := first(); got != "-- n17 --" {
		t.Fatalf("following again: first row %q", got)
	}
	// The PageUps that reached the first line (11 → 7 → 3 → 0, then twice
	// there) asked for older history; no other page key did.
	if want := []Action{ActOlder, ActOlder, ActOlder}; !reflect.DeepEqual(r.actions, want) {
		t.Fatalf("page keys asked the loop for %v, want %v", r.actions, want)
	}
}

func TestScreenKeys(t *testing.T) {
	r := &screenRig{}
	r.feed("\x14\x07\x0f\x18\x12\x03\x04")
	want := []Action{ActTakeControl, ActInterrupt, ActReconnect, ActForceStop, ActRecover, ActQuit, ActQuit}
	if !reflect.DeepEqual(r.actions, want) {
		t.Fatalf("actions %v, want %v", r.actions, want)
	}
}

// TestScreenS4S5S7 runs the composer rules through the screen: S5 an
// observer's Enter sends nothing and keeps the text; S4 a control change
// clears it; S7 a paste split anywhere is literal and never submits.
func TestScreenS4S5S7(t *testing.T) {
	r := &screenRig{}
	r.s.SetControl(Control{"conn-a", 1}, false)
	r.feed("/abandoned", "\r")
	if len(r.sent) != 0 || r.s.Composer.Text() != "/abandoned" || r.s.Notice() != ErrNotController.Message {
		t.Fatalf("S5: sent %q, composer %q, notice %q", r.sent, r.s.Composer.Text(), r.s.Notice())
	}
	r.s.SetControl(Control{"me", 2}, true)
	if r.s.Composer.Text() != "" || !strings.Contains(r.s.Notice(), "composer cleared") {
		t.Fatalf("S4: composer %q notice %q", r.s.Composer.Text(), r.s.Notice())
	}
	paste := "one\r\ntwo\x1b[31m \u2028 \x1b[200~nested"
	r.feed("\x1b", "[20", "0~"+paste[:5], paste[5:]+"\x1b[20", "1~")
	if len(r.sent) != 0 {
		t.Fatalf("S7: a paste submitted %q", r.sent)
	}
	r.feed("\r")
	if !reflect.DeepEqual(r.sent, []string{paste}) || r.s.Composer.Text() != "" {
		t.Fatalf("S7: sent %q, composer %q", r.sent, r.s.Composer.Text())
	}
	r.s.Settle(Outcome{Kind: Lost})
	if r.s.Notice() != OutcomeUnknown || r.s.Composer.Text() != "" {
		t.Fatalf("lost outcome: notice %q composer %q", r.s.Notice(), r.s.Composer.Text())
	}
}

func TestScreenDialog(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Action
	}{
		{"y", ActConfirm}, {"Y", ActConfirm}, {"n", ActDecline}, {"\r", ActDecline},
		{"\x03", ActDecline}, {"\x1b[200~y\x1b[201~", ActNone}, {"yes", ActNone}, {"\x14", ActNone},
	} {
		t.Run(fmt.Sprintf("%q", tc.in), func(t *testing.T) {
			r := &screenRig{}
			r.s.OpenDialog(Dialog{Title: "force stop", Question: "y/N"})
			r.feed(tc.in)
			got := ActNone
			if len(r.actions) > 0 {
				got = r.actions[0]
			}
			if got != tc.want || len(r.actions) > 1 || (got == ActNone) != (r.s.Dialog() != nil) {
				t.Fatalf("actions %v, dialog open %v; want %v", r.actions, r.s.Dialog() != nil, tc.want)
			}
			if r.s.Composer.Text() != "" {
				t.Fatalf("a dialog key reached the composer: %q", r.s.Composer.Text())
			}
		})
	}
}

func TestDialogWrapsWithoutLoss(t *testing.T) {
	intent := "force stop execution x-1: kill every process in mosaic-engine-1.scope (pid 10 node, pid 11 sleep 300)"
	d := Dialog{Title: "force stop", Facts: [][2]string{{"intent", intent}, {"forged", "a\n  scope: evil"}}, Question: "y/N"}
	lines := d.Lines(40)
	var joined []string
	for i, l := range lines {
		if Width(l) > 40 {
			t.Fatalf("line %q too wide", l)
		}
		if i > 0 && i < 5 {
			joined = append(joined, strings.TrimSpace(strings.TrimPrefix(l, "  intent: ")))
		}
	}
	if got := strings.Join(joined, " "); got != intent {
		t.Fatalf("intent rows %q\njoin to %q", lines, got)
	}
	if !strings.HasPrefix(lines[5], "  forged: a^J") {
		t.Fatalf("a value with LF made a row: %q", lines)
	}
}

func part(entry string, n int, last bool, frags ...history.Fragment) history.Part {
	return history.Part{Entry: entry, Kind: history.KindMessage, Role: "assistant", Part: n, LastPart: last, Blocks: frags}
}

func frag(block, n int, last bool, b protocol.Block) history.Fragment {
	return history.Fragment{Block: block, Fragment: n, LastFragment: last, Content: b}
}

func TestAddPageJoinsPartsAndFragments(t *testing.T) {
	args := `{"command":"ls"}`
	p := &history.Page{More: true, Parts: []history.Part{
		{Entry: "n.u", Kind: history.KindMessage, Role: "user", LastPart: true, Blocks: []history.Fragment{frag(0, 0, true, text("hi"))}},
		part("n.a", 0, false, frag(0, 0, false, text("Hel")), frag(0, 1, true, text("lo"))),
		part("n.a", 1, true, frag(1, 0, false, protocol.Block{Type: "toolCall", ToolName: "bash", Text: args[:5]}),
			frag(1, 1, true, protocol.Block{Type: "toolCall", ToolName: "bash", Text: args[5:]})),
		{Entry: "x.1", Kind: history.KindNotice, Notice: &history.Notice{Code: "malformed-line", Detail: "line 7"}},
		{Entry: "n.c", Kind: history.KindCompaction, LastPart: true, Blocks: []history.Fragment{frag(0, 0, true, text("summary"))}},
		part("n.z", 0, false, frag(0, 0, true, text("cut"))),
	}}
	tr := &Transcript{}
	tr.AddPage(p)
	wantLines(t, tr, 0,
		"[user]", "  hi",
		"[assistant]", "  Hello", `  → bash {"command":"ls"}`,
		"-- history: malformed-line: line 7 --",
		"[compaction summary]", "  summary",
		"[assistant]", "  cut",
		"-- history: entry n.z continues after this page --")
}

// TestFollowEqualsFromView: the incremental Transcript of a growing view
// renders exactly what a fresh build of each view renders (E7: the
// terminal and the library show the same lines).
func TestFollowEqualsFromView(t *testing.T) {
	page, _ := json.Marshal(history.Page{Parts: []history.Part{
		{Entry: "n.u", Kind: history.KindMessage, Role: "user", LastPart: true, Blocks: []history.Fragment{frag(0, 0, true, text("q"))}}}})
	s := &stream{exec: "x1", seq: 4}
	var evs []protocol.Event
	evs = append(evs, s.ev(protocol.EventMessageStart, "m1", start("assistant")))
	for i, w := range []string{"a \x1b[31m", "b\u202e", "c\n", "d"} {
		evs = append(evs, s.ev(protocol.EventTextDelta, "m1", delta(0, i, w, i == 3)))
	}
	evs = append(evs, s.ev(protocol.EventMessageEnd, "m1", end("assistant", text("a \x1b[31mb\u202ec\nd"))))
	evs = append(evs, s.ev(protocol.EventRunSettled, "", nil))
	var f Follow
	views := []client.View{}
	for i := 0; i <= len(evs); i++ {
		views = append(views, client.View{History: page, Execution: "x1", From: 5, Events: evs[:i]})
	}
	views = append(views,
		client.View{History: page, Execution: "x1", From: 5, Events: evs, TailMarker: client.ReasonGap, Held: 2},
		client.View{History: page, SeamMarker: client.ReasonNotQuiet, Execution: "x2", From: 1},
		client.View{History: page, Execution: "x2", From: 1})
	for i, v := range views {
		got, want := f.Update(Older{}, v).Lines(30), FromView(v).Lines(30)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("view %d: follow\n%q\nfresh\n%q", i, got, want)
		}
	}
	all := strings.Join(FromView(views[len(evs)]).Lines(0), "\n")
	for _, want := range []string{"[user]", "a ^[[31mb<U+202E>c", "  d", "-- run settled --"} {
		if !strings.Contains(all, want) {
			t.Fatalf("transcript %q lacks %q", all, want)
		}
	}
	if strings.Contains(all, "reconcile") {
		t.Fatalf("a contiguous view shows a marker: %q", all)
	}
	tail := strings.Join(FromView(views[len(evs)+1]).Lines(0), "\n")
	if !strings.Contains(tail, "== reconcile: events are missing here; 2 later events held") {
		t.Fatalf("tail marker missing: %q", tail)
	}
}

// BenchmarkScreenRender is one frame of a long conversation: 2,000
// finished messages of a few wrapped lines, at 120x40. The first frame
// (what attach shows first: every message wrapped once) is measured on
// its own and reported as cold-frame-ms and cold-frame-B; ns/op and B/op
// are the frames after it.
func BenchmarkScreenRender(b *testing.B) {
	tr := &Transcript{}
	for i := range 2000 {
		tr.AddHistory(HistoryMessage{Role: "assistant", Content: []protocol.Block{text(fmt.Sprintf("message %d: %s", i, strings.Repeat("word ", 60)))}})
	}
	s := Screen{Transcript: tr}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	s.Render(120, 40)
	cold := time.Since(start)
	runtime.ReadMemStats(&after)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		s.Render(120, 40)
	}
	b.ReportMetric(float64(cold)/float64(time.Millisecond), "cold-frame-ms")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc), "cold-frame-B")
}

// BenchmarkFollowDelta is the per-frame cost of one streamed delta
// through Follow: the view grows by one event.
func BenchmarkFollowDelta(b *testing.B) {
	st := &stream{exec: "x1"}
	evs := []protocol.Event{st.ev(protocol.EventMessageStart, "m1", start("assistant"))}
	for i := range b.N {
		evs = append(evs, st.ev(protocol.EventTextDelta, "m1", delta(0, i, "w ", false)))
	}
	var f Follow
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		f.Update(Older{}, client.View{Execution: "x1", From: 1, Events: evs[:i+2]})
	}
}

// TestLinesCacheFollowsChanges: a Transcript rendered after every event
// (its line cache warm, at changing widths) shows what a fresh one built
// from the same events shows.
func TestLinesCacheFollowsChanges(t *testing.T) {
	s := &stream{exec: "x1"}
	tool := func(f func(*protocol.Tool)) func(*protocol.Event) {
		return func(e *protocol.Event) {
			e.Tool = &protocol.Tool{CallID: "c1", Name: "bash"}
			f(e.Tool)
		}
	}
	evs := []protocol.Event{
		s.ev(protocol.EventMessageStart, "m1", start("assistant")),
		s.ev(protocol.EventTextDelta, "m1", delta(0, 0, "a long first line that wraps ", false)),
		s.ev(protocol.EventTextDelta, "m1", delta(0, 1, "and more\nsecond", true)),
		s.ev(protocol.EventMessageEnd, "m1", end("assistant", text("a long first line that wraps and more\nsecond"))),
		s.ev(protocol.EventToolStart, "m1", tool(func(x *protocol.Tool) { x.Args = json.RawMessage(`{"command":"ls"}`) })),
		s.ev(protocol.EventToolUpdate, "m1", tool(func(x *protocol.Tool) { x.Result = json.RawMessage(`"a"`) })),
		s.ev(protocol.EventToolEnd, "m1", tool(func(x *protocol.Tool) { x.Result, x.IsError = json.RawMessage(`"a\nb"`), true })),
		s.ev(protocol.EventMessageEnd, "m2", func(e *protocol.Event) {
			end("toolResult", text("a\nb"))(e)
			e.Tool = &protocol.Tool{CallID: "c1", Name: "bash"}
		}),
	}
	s.seq += 3 // a late delta for m1: a marker, and m1 continues as a new message
	evs = append(evs, s.ev(protocol.EventTextDelta, "m1", delta(0, 5, "late", false)))
	warm := &Transcript{}
	for i, e := range evs {
		warm.Apply(e)
		fresh := apply(&Transcript{}, evs[:i+1]...)
		for _, w := range []int{30, 0, 12, 30} {
			if got, want := warm.Lines(w), fresh.Lines(w); !reflect.DeepEqual(got, want) {
				t.Fatalf("after event %d at width %d: cached\n%q\nfresh\n%q", i, w, got, want)
			}
		}
	}
}
