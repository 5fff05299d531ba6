package terminal

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/client"
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

// library feeds events through the client library's Transcript, after
// an observed reply with an empty page whose events start at seq start
// (quiet or not), and returns what it shows.
func library(exec string, start uint64, quiet bool, es ...protocol.Event) *Transcript {
	ct := client.NewTranscript()
	ct.Update(client.Update{Record: "observed", Observed: &protocol.Observed{Record: "observed",
		Binding: protocol.Binding{Execution: exec},
		Seam: protocol.Seam{Execution: exec, Replay: "available", ReplayFrom: 1, ReplayUntil: start - 1,
			ReplayStart: start, Quiet: quiet, Reconcile: !quiet}}})
	for _, e := range es {
		ct.Update(client.Update{Record: protocol.RecordEvent, Event: &e})
	}
	return FromView(ct.Snapshot())
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

// TestViewSeams: order, deduplication and seams are the client library's
// (its Transcript); the terminal shows the markers it puts in its view,
// and never joins what follows one to what came before it.
func TestViewSeams(t *testing.T) {
	held := func(reason string, n int) string {
		return fmt.Sprintf("== reconcile: %s; %d later events held until the page is re-read ==", reasonText(reason), n)
	}
	cases := []struct {
		name   string
		start  uint64
		quiet  bool
		events func(s *stream) []protocol.Event
		want   []string
		marked bool
	}{
		{"identical repeat is dropped", 1, true, func(s *stream) []protocol.Event {
			a := s.ev(protocol.EventMessageStart, "m1", start("assistant"))
			b := s.ev(protocol.EventTextDelta, "m1", delta(0, 0, "ab", false))
			c := s.ev(protocol.EventTextDelta, "m1", delta(0, 1, "cd", false))
			return []protocol.Event{a, b, a, b, c, b, c}
		}, []string{"[assistant] …", "  abcd"}, false},
		{"repeat with other bytes reconciles", 1, true, func(s *stream) []protocol.Event {
			a := s.ev(protocol.EventMessageStart, "m1", start("assistant"))
			b := s.ev(protocol.EventTextDelta, "m1", delta(0, 0, "ab", false))
			b2 := b
			b2.Text = "XY"
			return []protocol.Event{a, b, b2}
		}, []string{"[assistant] …", "  ab", held(client.ReasonConflict, 1)}, true},
		{"gap reconciles and is never concatenated across", 1, true, func(s *stream) []protocol.Event {
			a := s.ev(protocol.EventMessageStart, "m1", start("assistant"))
			b := s.ev(protocol.EventTextDelta, "m1", delta(0, 0, "before", false))
			s.ev(protocol.EventTextDelta, "m1", delta(0, 1, " lost", false))
			d := s.ev(protocol.EventTextDelta, "m1", delta(0, 2, " after", false))
			return []protocol.Event{a, b, d}
		}, []string{"[assistant] …", "  before", held(client.ReasonGap, 1)}, true},
		{"new execution reconciles; its m1 is never joined to the old one", 1, true, func(s *stream) []protocol.Event {
			a := s.ev(protocol.EventMessageStart, "m1", start("assistant"))
			b := s.ev(protocol.EventTextDelta, "m1", delta(0, 0, "old", false))
			s2 := &stream{exec: "x2"}
			c := s2.ev(protocol.EventMessageStart, "m1", start("assistant"))
			d := s2.ev(protocol.EventTextDelta, "m1", delta(0, 0, "new", false))
			return []protocol.Event{a, b, c, d}
		}, []string{"[assistant] …", "  old", held(client.ReasonNewExecution, 2)}, true},
		{"joined mid-run", 7, false, func(s *stream) []protocol.Event {
			s.seq = 6
			return []protocol.Event{s.ev(protocol.EventTextDelta, "m3", delta(0, 4, "tail", false))}
		}, []string{"== reconcile: " + reasonText(client.ReasonNotQuiet) + " ==", "[assistant] … (start not seen)", "  …tail"}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := library("x1", c.start, c.quiet, c.events(&stream{exec: "x1"})...)
			wantLines(t, tr, 0, c.want...)
			if tr.Marked() != c.marked {
				t.Fatalf("Marked = %v, want %v", tr.Marked(), c.marked)
			}
		})
	}
}

// TestViewStreamChecks: what the stream says about its own messages is
// checked where they are built.
func TestViewStreamChecks(t *testing.T) {
	cases := []struct {
		name   string
		events func(s *stream) []protocol.Event
		want   []string
		marked bool
	}{
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
		{"output lost says how much", func(s *stream) []protocol.Event {
			return []protocol.Event{
				s.ev(protocol.EventUnavailable, "", func(e *protocol.Event) { e.Reason, e.Dropped = protocol.ReasonOutputLost, 1234 }),
			}
		}, []string{"-- unavailable: output-lost (1234 engine events dropped) --"}, false},
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

func TestViewHistoryThenEvents(t *testing.T) {
	tr := &Transcript{}
	tr.AddHistory(HistoryMessage{Role: "user", Content: []protocol.Block{text("from the page")}})
	tr.AddHistory(HistoryMessage{Role: "toolResult", Content: []protocol.Block{text("ok")}, Tool: &protocol.Tool{CallID: "c9", Name: "read"}})
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
// same wire records; what the library decodes from JSON renders exactly
// as the events the adapter produced, and a replay overlapping what was
// already applied changes nothing.
func TestViewSameStreamFromTheWire(t *testing.T) {
	s := &stream{exec: "x1"}
	evs := []protocol.Event{
		s.ev(protocol.EventMessageStart, "m1", start("assistant")),
		s.ev(protocol.EventTextDelta, "m1", delta(0, 0, "a\u2028b\x1b", false)),
		s.ev(protocol.EventToolStart, "m1", func(e *protocol.Event) {
			e.Tool = &protocol.Tool{CallID: "c", Name: "bash", Args: json.RawMessage(`{"command":"echo hi 2>&1 <in"}`)}
		}),
		s.ev(protocol.EventMessageEnd, "m1", end("assistant", text("a\u2028b\x1b"))),
	}
	direct := apply(&Transcript{}, evs...)
	var decoded []protocol.Event
	for i, e := range append(evs, evs[1:]...) {
		b, err := protocol.Line(e)
		if err != nil {
			t.Fatal(err)
		}
		var d protocol.Event
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		decoded = append(decoded, d)
	}
	wire := library("x1", 1, true, decoded...)
	for _, w := range []int{0, 10, 80} {
		if a, b := direct.Lines(w), wire.Lines(w); !reflect.DeepEqual(a, b) {
			t.Fatalf("width %d: direct %q, wire %q", w, a, b)
		}
	}
	if wire.Marked() {
		t.Fatal("overlapping replay marked a reconcile")
	}
	// Records are encoded without HTML escaping, so arguments read as
	// the model wrote them with nothing undone at render time.
	if all := strings.Join(wire.Lines(0), "\n"); !strings.Contains(all, `{"command":"echo hi 2>&1 <in"}`) {
		t.Fatalf("tool arguments not as written: %q", all)
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

// FuzzTranscript feeds arbitrary decoded events through the client
// library's Transcript (the first one names the execution and where the
// events start) and renders its views: no panic, every rendered line is
// inert and fits its width, and the incremental Follow shows what a fresh
// build of the last view shows.
func FuzzTranscript(f *testing.F) {
	f.Add([]byte(`{"record":"event","kind":"message-start","execution":"x","seq":1,"message":"m1","role":"assistant"}
{"record":"event","kind":"text-delta","execution":"x","seq":2,"message":"m1","block":0,"fragment":0,"text":"hi\u001b["}
{"record":"event","kind":"tool-start","execution":"x","seq":3,"tool":{"callId":"c","name":"b\n"}}
{"record":"event","kind":"text-delta","execution":"x","seq":2,"message":"m1","block":0,"fragment":0,"text":"hi\u001b["}
{"record":"event","kind":"message-end","execution":"x","seq":4,"message":"m1","part":3,"content":[{"type":"toolCall","args":{"a":1}}]}
{"record":"event","kind":"message-end","execution":"x","seq":6,"message":"m1","part":3,"content":[{"type":"toolCall","args":{"a":1}}]}`), uint8(20))
	f.Fuzz(func(t *testing.T, in []byte, w uint8) {
		ct := client.NewTranscript()
		var fl Follow
		width := int(w%100) + 6
		var last *Transcript
		for _, line := range strings.Split(string(in), "\n") {
			var e protocol.Event
			if json.Unmarshal([]byte(line), &e) != nil {
				continue
			}
			if last == nil {
				ct.Update(client.Update{Record: "observed", Observed: &protocol.Observed{Record: "observed",
					Seam: protocol.Seam{Execution: e.Execution, ReplayStart: e.Seq, Quiet: e.Seq%2 == 0}}})
			}
			ct.Update(client.Update{Record: protocol.RecordEvent, Event: &e})
			last = fl.Update(Older{}, ct.Snapshot())
			for _, l := range last.Lines(width) {
				if Width(l) > width {
					t.Fatalf("line %q wider than %d", l, width)
				}
				if bad := raw(l); bad != "" {
					t.Fatalf("line %q holds %s", l, bad)
				}
			}
		}
		if last != nil {
			if got, want := last.Lines(width), FromView(ct.Snapshot()).Lines(width); !reflect.DeepEqual(got, want) {
				t.Fatalf("follow\n%q\nfresh\n%q", got, want)
			}
		}
	})
}

// TestCompactArgs: tool arguments are shown compact, as the JSON has
// them: the controller writes records without HTML escaping, so nothing is
// undone here, and an escape in the JSON itself stays as written.
func TestCompactArgs(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"command": "ls 2>&1 < in"}`, `{"command":"ls 2>&1 < in"}`},
		{`{"command":"a\\u003e b"}`, `{"command":"a\\u003e b"}`},
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

// TestStopReasonInHeader: a message that ended as turns do (Pi's stop and
// toolUse, Claude's end_turn, tool_use and stop_sequence) has a plain
// header; any other stop reason (an error, the token limit) is named.
func TestStopReasonInHeader(t *testing.T) {
	for _, tc := range []struct{ reason, head string }{
		{"stop", "[assistant]"},
		{"toolUse", "[assistant]"},
		{"end_turn", "[assistant]"},
		{"tool_use", "[assistant]"},
		{"stop_sequence", "[assistant]"},
		{"error", "[assistant] (error)"},
		{"max_tokens", "[assistant] (max_tokens)"},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			s := &stream{exec: "x1"}
			tr := apply(&Transcript{},
				s.ev(protocol.EventMessageStart, "m1", start("assistant")),
				s.ev(protocol.EventMessageEnd, "m1", func(e *protocol.Event) {
					end("assistant", text("hi"))(e)
					e.StopReason = tc.reason
				}),
			)
			wantLines(t, tr, 80, tc.head, "  hi")
		})
	}
}

// TestToolResultHeader: a tool result's header names its tool when the
// engine said it (Pi) and nothing when it did not (Claude names only the
// call), never an empty name.
func TestToolResultHeader(t *testing.T) {
	for _, tc := range []struct {
		name string
		tool protocol.Tool
		head string
	}{
		{"named", protocol.Tool{CallID: "c1", Name: "bash"}, "[tool result bash]"},
		{"unnamed", protocol.Tool{CallID: "c1"}, "[tool result]"},
		{"unnamed error", protocol.Tool{CallID: "c1", IsError: true}, "[tool result (error)]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &stream{exec: "x1"}
			tool := tc.tool
			tr := apply(&Transcript{},
				s.ev(protocol.EventMessageStart, "m1", start("toolResult")),
				s.ev(protocol.EventMessageEnd, "m1", func(e *protocol.Event) {
					end("toolResult", text("out"))(e)
					e.Tool = &tool
				}),
			)
			wantLines(t, tr, 80, tc.head, "  out")
		})
	}
}
