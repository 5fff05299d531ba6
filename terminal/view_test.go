package terminal

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/protocol"
)

// stream numbers events of one execution as the engine adapter does.
type stream struct {
	exec string
	seq  uint64
}

func (s *stream) ev(kind protocol.EventKind, msg string, f func(*protocol.Event)) protocol.Event {
	s.seq++
	e := protocol.Event{Record: protocol.RecordEvent, Kind: kind, Execution: s.exec, Seq: s.seq, Message: msg}
	if f != nil {
		f(&e)
	}
	return e
}

func start(role string) func(*protocol.Event) {
	return func(e *protocol.Event) { e.Role = role }
}

func delta(block, frag int, text string, last bool) func(*protocol.Event) {
	return func(e *protocol.Event) {
		e.Role, e.Block, e.Fragment, e.LastFragment, e.Text = "assistant", protocol.Ordinal(block), protocol.Ordinal(frag), last, text
		e.UpdateMode = protocol.UpdateAppend
	}
}

func end(role string, content ...protocol.Block) func(*protocol.Event) {
	return func(e *protocol.Event) {
		e.Role, e.Content, e.Part, e.LastPart, e.UpdateMode = role, content, protocol.Ordinal(0), true, protocol.UpdateReplace
		e.StopReason = "stop"
	}
}

func text(s string) protocol.Block { return protocol.Block{Type: "text", Text: s} }

func apply(t *Transcript, es ...protocol.Event) *Transcript {
	for _, e := range es {
		t.Apply(e)
	}
	return t
}

func wantLines(t *testing.T, tr *Transcript, width int, want ...string) {
	t.Helper()
	got := tr.Lines(width)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Lines(%d):\n got %q\nwant %q", width, got, want)
	}
}

func TestViewDeltasThenReplace(t *testing.T) {
	s := &stream{exec: "x1"}
	tr := apply(&Transcript{},
		s.ev(protocol.EventMessageStart, "m1", start("user")),
		s.ev(protocol.EventMessageEnd, "m1", end("user", text("hi there"))),
		s.ev(protocol.EventMessageStart, "m2", start("assistant")),
		s.ev(protocol.EventThinkingDelta, "m2", delta(0, 0, "let me", false)),
		s.ev(protocol.EventThinkingDelta, "m2", delta(0, 1, " think", false)),
		s.ev(protocol.EventThinkingDelta, "m2", delta(0, 2, "", true)),
		s.ev(protocol.EventTextDelta, "m2", delta(1, 0, "Hel", false)),
		s.ev(protocol.EventTextDelta, "m2", delta(1, 1, "o\nwor", false)),
	)
	wantLines(t, tr, 80,
		"[user]", "  hi there",
		"[assistant] …", "  | let me think", "  Helo", "  wor")
	apply(tr,
		s.ev(protocol.EventTextDelta, "m2", delta(1, 2, "ld", false)),
		s.ev(protocol.EventMessageEnd, "m2", end("assistant", protocol.Block{Type: "thinking", Text: "let me think"}, text("Hello\nworld"))),
		s.ev(protocol.EventRunSettled, "", nil),
	)
	wantLines(t, tr, 80,
		"[user]", "  hi there",
		"[assistant]", "  | let me think", "  Hello", "  world",
		"-- run settled --")
	if tr.Marked() {
		t.Fatal("a clean stream marked a reconcile")
	}
}

func TestViewToolCallWhileItRuns(t *testing.T) {
	s := &stream{exec: "x1"}
	call := func(f func(*protocol.Event), tool *protocol.Tool) func(*protocol.Event) {
		return func(e *protocol.Event) { f(e); e.BlockType = "toolCall"; e.Tool = tool }
	}
	tool := func(f func(*protocol.Tool)) func(*protocol.Event) {
		return func(e *protocol.Event) {
			e.Role = "assistant"
			e.Tool = &protocol.Tool{CallID: "c1", Name: "bash"}
			f(e.Tool)
		}
	}
	args := json.RawMessage(`{"command": "ls"}`)
	tr := apply(&Transcript{},
		s.ev(protocol.EventMessageStart, "m1", start("assistant")),
		s.ev(protocol.EventToolCallDelta, "m1", call(delta(0, 0, "", false), &protocol.Tool{CallID: "c1", Name: "bash"})),
		s.ev(protocol.EventToolCallDelta, "m1", call(delta(0, 1, `{"command":`, false), nil)),
	)
	wantLines(t, tr, 80, "[assistant] …", `  → bash {"command":`)
	apply(tr,
		s.ev(protocol.EventToolCallDelta, "m1", call(delta(0, 2, "", true), &protocol.Tool{CallID: "c1", Name: "bash", Args: args})),
		s.ev(protocol.EventMessageEnd, "m1", end("assistant", protocol.Block{Type: "toolCall", ToolCallID: "c1", ToolName: "bash", Args: args})),
		s.ev(protocol.EventToolStart, "m1", tool(func(x *protocol.Tool) { x.Args = args })),
		s.ev(protocol.EventToolUpdate, "m1", tool(func(x *protocol.Tool) { x.Result = json.RawMessage(`{"content":[{"type":"text","text":"a\n"}]}`) })),
		s.ev(protocol.EventToolUpdate, "m1", tool(func(x *protocol.Tool) { x.Result = json.RawMessage(`{"content":[{"type":"text","text":"a\nb"}]}`) })),
	)
	running := []string{"[assistant]", `  → bash {"command":"ls"}`, "[tool bash running]", `  → {"command":"ls"}`, "  a", "  b"}
	wantLines(t, tr, 80, running...)
	apply(tr, s.ev(protocol.EventToolEnd, "m1", tool(func(x *protocol.Tool) { x.Result = json.RawMessage(`{"content":[{"type":"text","text":"a\nb\nc"}]}`) })))
	wantLines(t, tr, 80, "[assistant]", `  → bash {"command":"ls"}`, "[tool bash done]", `  → {"command":"ls"}`, "  a", "  b", "  c")
	// The result message hides the progress item.
	apply(tr,
		s.ev(protocol.EventMessageStart, "m2", start("toolResult")),
		s.ev(protocol.EventMessageEnd, "m2", func(e *protocol.Event) {
			end("toolResult", text("a\nb\nc"))(e)
			e.Tool = &protocol.Tool{CallID: "c1", Name: "bash"}
		}),
	)
	wantLines(t, tr, 80, "[assistant]", `  → bash {"command":"ls"}`, "[tool result bash]", "  a", "  b", "  c")
}

func TestViewToolOutputBounded(t *testing.T) {
	s := &stream{exec: "x1"}
	out := strings.Repeat("line\n", 30) + "last"
	res, _ := json.Marshal(map[string]any{"content": []map[string]string{{"type": "text", "text": out}}})
	tr := apply(&Transcript{},
		s.ev(protocol.EventToolStart, "m1", func(e *protocol.Event) { e.Tool = &protocol.Tool{CallID: "c", Name: "bash"} }),
		s.ev(protocol.EventToolUpdate, "m1", func(e *protocol.Event) {
			e.Tool = &protocol.Tool{CallID: "c", Name: "bash", Result: res}
		}),
	)
	lines := tr.Lines(80)
	if len(lines) != 1+1+MaxToolLines || lines[1] != "  … 11 earlier lines" || lines[len(lines)-1] != "  last" {
		t.Fatalf("bounded tool output: %q", lines)
	}
}

func TestViewSeams(t *testing.T) {
	cases := []struct {
		name   string
		events func(s *stream) []protocol.Event
		want   []string
		marked bool
	}{
		{"identical repeat is dropped", func(s *stream) []protocol.Event {
			a := s.ev(protocol.EventMessageStart, "m1", start("assistant"))
			b := s.ev(protocol.EventTextDelta, "m1", delta(0, 0, "ab", false))
			c := s.ev(protocol.EventTextDelta, "m1", delta(0, 1, "cd", false))
			return []protocol.Event{a, b, a, b, c, b, c}
		}, []string{"[assistant] …", "  abcd"}, false},
		{"repeat with other bytes reconciles", func(s *stream) []protocol.Event {
			a := s.ev(protocol.EventMessageStart, "m1", start("assistant"))
			b := s.ev(protocol.EventTextDelta, "m1", delta(0, 0, "ab", false))
			b2 := b
			b2.Text = "XY"
			return []protocol.Event{a, b, b2}
		}, []string{"[assistant] …", "  ab", "== reconcile: event 2 repeated with different content =="}, true},
		{"gap reconciles and is never concatenated across", func(s *stream) []protocol.Event {
			a := s.ev(protocol.EventMessageStart, "m1", start("assistant"))
			b := s.ev(protocol.EventTextDelta, "m1", delta(0, 0, "before", false))
			s.ev(protocol.EventTextDelta, "m1", delta(0, 1, " lost", false))
			d := s.ev(protocol.EventTextDelta, "m1", delta(0, 2, " after", false))
			return []protocol.Event{a, b, d}
		}, []string{"[assistant] …", "  before", "== reconcile: sequence gap: expected 3, got 4 ==", "[assistant] … (start not seen)", "  … after"}, true},
		{"new execution reconciles; its m1 is another message", func(s *stream) []protocol.Event {
			a := s.ev(protocol.EventMessageStart, "m1", start("assistant"))
			b := s.ev(protocol.EventTextDelta, "m1", delta(0, 0, "old", false))
			s2 := &stream{exec: "x2"}
			c := s2.ev(protocol.EventMessageStart, "m1", start("assistant"))
			d := s2.ev(protocol.EventTextDelta, "m1", delta(0, 0, "new", false))
			return []protocol.Event{a, b, c, d}
		}, []string{"[assistant] …", "  old", "== reconcile: new execution x2 ==", "[assistant] …", "  new"}, true},
		{"joined mid-stream", func(s *stream) []protocol.Event {
			s.seq = 6
			return []protocol.Event{s.ev(protocol.EventTextDelta, "m3", delta(0, 4, "tail", false))}
		}, []string{"== reconcile: joined execution x1 at seq 7 ==", "[assistant] … (start not seen)", "  …tail"}, true},
		{"fragment gap within the stream", func(s *stream) []protocol.Event {
			return []protocol.Event{
				s.ev(protocol.EventMessageStart, "m1", start("assistant")),
				s.ev(protocol.EventTextDelta, "m1", delta(0, 0, "a", false)),
				s.ev(protocol.EventTextDelta, "m1", delta(0, 2, "c", false)),
			}
		}, []string{"[assistant] …", "  a", "== reconcile: fragment gap in message m1 block 0: expected 1, got 2 ==", "[assistant] … (start not seen)", "  …c"}, true},
		{"delta after the end", func(s *stream) []protocol.Event {
			return []protocol.Event{
				s.ev(protocol.EventMessageStart, "m1", start("assistant")),
				s.ev(protocol.EventMessageEnd, "m1", end("assistant", text("done"))),
				s.ev(protocol.EventTextDelta, "m1", delta(0, 0, "late", false)),
			}
		}, []string{"[assistant]", "  done", "== reconcile: delta after the end of message m1 ==", "[assistant] … (start not seen)", "  late"}, true},
		{"message started twice", func(s *stream) []protocol.Event {
			return []protocol.Event{
				s.ev(protocol.EventMessageStart, "m1", start("assistant")),
				s.ev(protocol.EventTextDelta, "m1", delta(0, 0, "one", false)),
				s.ev(protocol.EventMessageStart, "m1", start("assistant")),
				s.ev(protocol.EventTextDelta, "m1", delta(0, 0, "two", false)),
			}
		}, []string{"[assistant] …", "  one", "== reconcile: message m1 started twice ==", "[assistant] …", "  two"}, true},
		{"multipart final with a missing part", func(s *stream) []protocol.Event {
			p := func(n int, last bool, b protocol.Block) func(*protocol.Event) {
				return func(e *protocol.Event) {
					end("assistant", b)(e)
					e.Part, e.LastPart = protocol.Ordinal(n), last
				}
			}
			return []protocol.Event{
				s.ev(protocol.EventMessageStart, "m1", start("assistant")),
				s.ev(protocol.EventMessageEnd, "m1", p(0, false, text("zero"))),
				s.ev(protocol.EventMessageEnd, "m1", p(2, false, text("two"))),
				s.ev(protocol.EventMessageEnd, "m1", p(1000000000, true, text("last"))),
			}
		}, []string{"[assistant]", "  zero", "  [part 1 missing]", "  two", "  [parts 3-999999999 missing]", "  last"}, false},
		{"notices stay one line and inert", func(s *stream) []protocol.Event {
			return []protocol.Event{
				s.ev(protocol.EventUnavailable, "", func(e *protocol.Event) {
					e.Reason, e.Native = protocol.ReasonUnknownNative, "evil\n\x1b[2J\u202e"
				}),
				s.ev("brand-new-kind", "", nil),
			}
		}, []string{"-- unavailable: unknown-native-event (evil^J^[[2J<U+202E>) --", "-- unavailable: unknown event kind brand-new-kind --"}, false},
		{"engine text is inert in bodies and headers", func(s *stream) []protocol.Event {
			return []protocol.Event{
				s.ev(protocol.EventMessageStart, "m1", start("assist\nant\x1b]0;x\x07")),
				s.ev(protocol.EventMessageEnd, "m1", end("assist\nant\x1b]0;x\x07", text("red \x1b[31mX\x1b[0m\r\nrlo \u202eexe.txt\u2028\u00a0\u009b\x9b"))),
			}
		}, []string{"[assist^Jant^[]0;x^G]", "  red ^[[31mX^[[0m^M", "  rlo <U+202E>exe.txt<U+2028>\u00a0<U+009B><0x9B>"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := apply(&Transcript{}, c.events(&stream{exec: "x1"})...)
			wantLines(t, tr, 0, c.want...)
			if tr.Marked() != c.marked {
				t.Fatalf("Marked = %v, want %v", tr.Marked(), c.marked)
			}
		})
	}
}

func TestViewExpectAndHistory(t *testing.T) {
	tr := &Transcript{}
	tr.AddHistory(HistoryMessage{Role: "user", Content: []protocol.Block{text("from the page")}})
	tr.AddHistory(HistoryMessage{Role: "toolResult", Content: []protocol.Block{text("ok")}, Tool: &protocol.Tool{CallID: "c9", Name: "read"}})
	tr.Expect("x5", 12)
	s := &stream{exec: "x5", seq: 11}
	apply(tr,
		s.ev(protocol.EventToolEnd, "m4", func(e *protocol.Event) { e.Tool = &protocol.Tool{CallID: "c9", Name: "read"} }),
		s.ev(protocol.EventRunSettled, "", nil),
	)
	wantLines(t, tr, 80, "[user]", "  from the page", "[tool result read]", "  ok", "-- run settled --")
	tr.Mark("seam not quiet")
	wantLines(t, tr, 80, "[user]", "  from the page", "[tool result read]", "  ok", "-- run settled --", "== reconcile: seam not quiet ==")
	if !tr.Marked() {
		t.Fatal("Mark did not mark")
	}
	tr.Reset()
	if len(tr.Lines(80)) != 0 || tr.Marked() {
		t.Fatal("Reset left content")
	}
}

// E7: the library and the terminal build the same Transcript from the
// same wire records; what the terminal decodes from JSON renders exactly
// as the events the adapter produced, and a replay overlapping what was
// already applied changes nothing.
func TestViewSameStreamFromTheWire(t *testing.T) {
	s := &stream{exec: "x1"}
	evs := []protocol.Event{
		s.ev(protocol.EventMessageStart, "m1", start("assistant")),
		s.ev(protocol.EventTextDelta, "m1", delta(0, 0, "a\u2028b\x1b", false)),
		s.ev(protocol.EventToolStart, "m1", func(e *protocol.Event) {
			e.Tool = &protocol.Tool{CallID: "c", Name: "bash", Args: json.RawMessage(`{"command":"echo hi"}`)}
		}),
		s.ev(protocol.EventMessageEnd, "m1", end("assistant", text("a\u2028b\x1b"))),
	}
	direct := apply(&Transcript{}, evs...)
	wire := &Transcript{}
	for i, e := range append(evs, evs[1:]...) {
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		var d protocol.Event
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		wire.Apply(d)
	}
	for _, w := range []int{0, 10, 80} {
		if a, b := direct.Lines(w), wire.Lines(w); !reflect.DeepEqual(a, b) {
			t.Fatalf("width %d: direct %q, wire %q", w, a, b)
		}
	}
	if wire.Marked() {
		t.Fatal("overlapping replay marked a reconcile")
	}
}

func TestViewLinesFitWidth(t *testing.T) {
	s := &stream{exec: "x1"}
	tr := apply(&Transcript{},
		s.ev(protocol.EventMessageStart, "m1", start("assistant")),
		s.ev(protocol.EventTextDelta, "m1", delta(0, 0, "漢字 and a rather long line \x1b[31m with \u202e escapes\nand 👩\u200d💻 emoji", false)),
		s.ev(protocol.EventUnavailable, "", func(e *protocol.Event) { e.Reason = "a-long-reason-code-for-testing" }),
		s.ev(protocol.EventToolStart, "m1", func(e *protocol.Event) {
			e.Tool = &protocol.Tool{CallID: "c", Name: "bash", Args: json.RawMessage(`{"command":"for i in 1 2 3; do echo $i; done"}`)}
		}),
	)
	for w := 6; w <= 60; w++ {
		for _, l := range tr.Lines(w) {
			if Width(l) > w {
				t.Fatalf("width %d: line %q is %d cells", w, l, Width(l))
			}
			if bad := raw(l); bad != "" {
				t.Fatalf("width %d: line %q holds %s", w, l, bad)
			}
		}
	}
}

func TestDigestOfInvalidRawJSON(t *testing.T) {
	a := protocol.Event{Kind: protocol.EventToolStart, Tool: &protocol.Tool{CallID: "c", Args: json.RawMessage("{bad")}}
	b := a
	b.Tool = &protocol.Tool{CallID: "c", Args: json.RawMessage("{worse")}
	a2 := a
	a2.Tool = &protocol.Tool{CallID: "c", Args: json.RawMessage("{bad")}
	if digest(a) == digest(b) || digest(a) != digest(a2) {
		t.Fatal("digest of events with invalid raw JSON")
	}
}

func TestViewDedupWindow(t *testing.T) {
	tr := &Transcript{}
	s := &stream{exec: "x1"}
	first := s.ev(protocol.EventRunSettled, "", nil)
	tr.Apply(first)
	for i := 0; i < 3*DedupWindow; i++ {
		s.seq++ // a gap every time: digests must stay bounded anyway
		tr.Apply(s.ev(protocol.EventRunSettled, "", nil))
	}
	if n := len(tr.digests); n > 2*DedupWindow+1 {
		t.Fatalf("%d digests kept", n)
	}
	tr = &Transcript{}
	s = &stream{exec: "x1"}
	first = s.ev(protocol.EventRunSettled, "", nil)
	tr.Apply(first)
	var last protocol.Event
	for i := 0; i < 3*DedupWindow; i++ {
		last = s.ev(protocol.EventRunSettled, "", nil)
		tr.Apply(last)
	}
	tr.Apply(last)
	if tr.Marked() {
		t.Fatal("contiguous stream with an identical repeat marked")
	}
	tr.Apply(first)
	if !tr.Marked() {
		t.Fatal("a repeat older than the window must mark a reconcile")
	}
}

// FuzzTranscript applies arbitrary decoded events: no panic, and every
// rendered line is inert and fits its width.
func FuzzTranscript(f *testing.F) {
	f.Add([]byte(`{"record":"event","kind":"message-start","execution":"x","seq":1,"message":"m1","role":"assistant"}
{"record":"event","kind":"text-delta","execution":"x","seq":2,"message":"m1","block":0,"fragment":0,"text":"hi\u001b["}
{"record":"event","kind":"tool-start","execution":"x","seq":4,"tool":{"callId":"c","name":"b\n"}}
{"record":"event","kind":"message-end","execution":"x","seq":5,"message":"m1","part":3,"content":[{"type":"toolCall","args":{"a":1}}]}`), uint8(20))
	f.Fuzz(func(t *testing.T, in []byte, w uint8) {
		tr := &Transcript{}
		for _, line := range strings.Split(string(in), "\n") {
			var e protocol.Event
			if json.Unmarshal([]byte(line), &e) == nil {
				tr.Apply(e)
			}
		}
		width := int(w%100) + 6
		for _, l := range tr.Lines(width) {
			if Width(l) > width {
				t.Fatalf("line %q wider than %d", l, width)
			}
			if bad := raw(l); bad != "" {
				t.Fatalf("line %q holds %s", l, bad)
			}
		}
	})
}

// TestCompactArgs: tool arguments read as the model wrote them, whatever
// HTML escaping json.Marshal added on the way; an escaped backslash before
// "u003e" is not an escape.
func TestCompactArgs(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"command": "ls 2\u003e\u00261 \u003c in"}`, `{"command":"ls 2>&1 < in"}`},
		{`{"command":"a\\u003e b"}`, `{"command":"a\\u003e b"}`},
		{`{"command":"a\\\u003e b"}`, `{"command":"a\\> b"}`},
		{`{"x":"\u2028 \"q\""}`, `{"x":"\u2028 \"q\""}`},
		{`not json`, `not json`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			if got := compact(json.RawMessage(tc.in)); got != tc.want {
				t.Fatalf("compact(%s) = %s, want %s", tc.in, got, tc.want)
			}
		})
	}
}

// TestViewTruncatedBlockSaysSo: a final block the live stream cut short
// is shown with a note, never as if whole.
func TestViewTruncatedBlockSaysSo(t *testing.T) {
	s := &stream{exec: "x1"}
	cut := text("the start of a long answer")
	cut.Truncated = true
	tr := apply(&Transcript{},
		s.ev(protocol.EventMessageStart, "m1", start("assistant")),
		s.ev(protocol.EventMessageEnd, "m1", end("assistant", cut, text("whole"))),
	)
	wantLines(t, tr, 120, "[assistant]", "  the start of a long answer", cutNote, "  whole")
}
