package claude

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/protocol"
)

// lockedWriter keeps what the adapter writes to the CLI's stdin.
type lockedWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
func (w *lockedWriter) Close() error { return nil }
func (w *lockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

func permissionLine(id string) string {
	return `{"type":"control_request","request_id":"` + id + `","request":{"subtype":"can_use_tool","tool_name":"Bash","display_name":"Bash",` +
		`"input":{"command":"touch ` + id + `","description":"x"},"description":"x","tool_use_id":"tu-` + id + `"}}` + "\n"
}

// TestDecisionsBounded: the engine's permission requests are kept within
// maxDecisions, the settled ones forgotten first: a CLI that asks and
// withdraws 20,000 times (the shape of the recorded interrupt, in a loop)
// leaves at most the bound, the newest kept. Past the bound with every
// kept request still pending, a request is answered with an error and
// never listed, so it can be neither allowed nor lost silently.
func TestDecisionsBounded(t *testing.T) {
	c, pw, w := drainedConn(t)
	const n = 20000
	for i := range n {
		id := fmt.Sprintf("r%d", i)
		io.WriteString(pw, permissionLine(id))
		io.WriteString(pw, `{"type":"control_cancel_request","request_id":"`+id+`"}`+"\n")
	}
	for i := range maxDecisions + 1 {
		io.WriteString(pw, permissionLine(fmt.Sprintf("p%d", i)))
	}
	pw.Close()
	<-c.Done()
	ds := c.Decisions()
	if len(ds) > maxDecisions {
		t.Fatalf("%d decisions kept after %d withdrawn and %d pending requests; want at most %d", len(ds), n, maxDecisions+1, maxDecisions)
	}
	pending := 0
	for _, d := range ds {
		if d.State == engine.DecisionPending {
			pending++
		}
		if pairOf(d.ID) == fmt.Sprintf("p%d/tu-p%d", maxDecisions, maxDecisions) {
			t.Fatalf("the request past the bound is listed: %+v", d)
		}
	}
	if pending != maxDecisions {
		t.Fatalf("%d pending decisions kept, want %d (every pending one within the bound)", pending, maxDecisions)
	}
	// The error answer is written off the reader's goroutine.
	last := `"request_id":"` + fmt.Sprintf("p%d", maxDecisions) + `"`
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(w.String(), last); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the request past the bound was not answered with an error")
		}
	}
}

// pairOf is the request id and tool use id a decision id names, without
// the suffix that makes it unique for the Conn's life.
func pairOf(id string) string {
	if i := strings.LastIndexByte(id, '#'); i >= 0 {
		return id[:i]
	}
	return id
}

// writeLine is a recorded-shape permission request for a Write whose
// content is content.
func writeLine(requestID, toolUseID, content string) string {
	return `{"type":"control_request","request_id":"` + requestID + `","request":{"subtype":"can_use_tool","tool_name":"Write","display_name":"Write",` +
		`"input":{"file_path":"/p/f","content":"` + content + `"},"description":"write a file","tool_use_id":"` + toolUseID + `"}}` + "\n"
}

// heldDecisionBytes adds up every string and input the kept decisions
// hold.
func heldDecisionBytes(c *Conn) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, d := range c.dec {
		n += len(d.requestID) + len(d.ID) + len(d.ToolName) + len(d.ToolUseID) + len(d.Input) + len(d.Title) + len(d.Message)
	}
	return n
}

// waitWritten waits for the adapter to write want to the CLI's stdin
// (an error answer is written off the reader's goroutine).
func waitWritten(t *testing.T, w *lockedWriter, want string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(w.String(), want); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the CLI never read %s", want)
		}
	}
}

// TestDecisionBytesBounded: the permission requests kept stay within
// engine.MaxDecisionBytes as well as within maxDecisions (recorded ones,
// under 300 bytes, meet only the count: TestDecisionsBounded). Past the
// bytes with the pending ones alone, a request is refused as one past
// the count: answered with an error, an unavailable event, never kept;
// a settled one is forgotten first to make room.
func TestDecisionBytesBounded(t *testing.T) {
	pr, pw := io.Pipe()
	w := &lockedWriter{}
	c, err := New(pr, w, testSession, engine.Options{Execution: "x1"})
	if err != nil {
		t.Fatal(err)
	}
	var evs []protocol.Event
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		for e := range c.Events() {
			evs = append(evs, e)
		}
	}()
	// Whole lines, each holding 1 MiB less about 4 KiB: 16 fit, 17 pass
	// 16 MiB.
	content := strings.Repeat("x", 1<<20-4<<10)
	for i := range 17 {
		io.WriteString(pw, writeLine(fmt.Sprint("r", i), fmt.Sprint("tu-", i), content))
	}
	// A request the adapter does not serve is answered with an error
	// once every line before it was read.
	io.WriteString(pw, `{"type":"control_request","request_id":"sync","request":{"subtype":"zz_sync"}}`+"\n")
	waitWritten(t, w, `"request_id":"sync","subtype":"error"`)
	ids := func() []string {
		var out []string
		for _, d := range c.Decisions() {
			if d.State != engine.DecisionPending {
				t.Fatalf("decision %s is %s, want every kept one pending", d.ID, d.State)
			}
			out = append(out, pairOf(d.ID))
		}
		return out
	}
	if got := ids(); len(got) != 16 || slices.Contains(got, "r16/tu-16") {
		t.Fatalf("decisions %v after 17 requests of 1 MiB, want r0 to r15", got)
	}
	if held := heldDecisionBytes(c); held > engine.MaxDecisionBytes {
		t.Fatalf("the decisions hold %d bytes, want at most %d", held, engine.MaxDecisionBytes)
	}
	waitWritten(t, w, `"request_id":"r16","subtype":"error"`)
	// r0 withdrawn is settled: the next request is kept, r0 forgotten.
	io.WriteString(pw, `{"type":"control_cancel_request","request_id":"r0"}`+"\n")
	io.WriteString(pw, writeLine("r17", "tu-17", content))
	pw.Close()
	<-c.Done()
	<-drained
	if got := ids(); len(got) != 16 || got[0] != "r1/tu-1" || got[15] != "r17/tu-17" {
		t.Fatalf("decisions %v, want r1 to r15 and r17 (the settled r0 forgotten)", got)
	}
	if held := heldDecisionBytes(c); held > engine.MaxDecisionBytes {
		t.Fatalf("the decisions hold %d bytes, want at most %d", held, engine.MaxDecisionBytes)
	}
	refused := 0
	for _, e := range evs {
		if e.Kind == protocol.EventUnavailable && e.Reason == protocol.ReasonUnsupportedNative && e.Native == "control_request/can_use_tool" {
			refused++
		}
	}
	if refused != 1 {
		t.Fatalf("%d requests shown refused, want 1 (r16)", refused)
	}
	if err := c.Decide(context.Background(), "r16/tu-16", engine.ChoiceAllowOnce); protocol.CodeOf(err) != protocol.CodeNoTurn {
		t.Fatalf("allow of the request past the bound: %v, want %s", err, protocol.CodeNoTurn)
	}
}

// TestDecisionIDsBounded: a permission request whose request id or tool
// use id passes maxNativeID is never kept, so the decision id the
// controller keeps for each approval it holds (closed ones too, after
// the adapter forgot them) stays short. One whose tool use id passes it
// is answered with an error; one whose request id passes it is left
// unanswered, the turn uncertain (an answer would echo the whole id).
func TestDecisionIDsBounded(t *testing.T) {
	long := strings.Repeat("r", maxNativeID)
	for _, tc := range []struct {
		name, requestID, toolUseID string
		kept                       bool
	}{
		{"ids at the bound", long, strings.Repeat("t", maxNativeID), true},
		{"request id past it", long + "r", "tu-1", false},
		{"tool use id past it", "r1", strings.Repeat("t", maxNativeID+1), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, pw, w := drainedConn(t)
			io.WriteString(pw, writeLine(tc.requestID, tc.toolUseID, "x"))
			pw.Close()
			<-c.Done()
			ds := c.Decisions()
			if tc.kept {
				if len(ds) != 1 || pairOf(ds[0].ID) != tc.requestID+"/"+tc.toolUseID {
					t.Fatalf("decisions %d, want the request kept", len(ds))
				}
				return
			}
			if len(ds) != 0 {
				t.Fatalf("%d decisions kept, want none", len(ds))
			}
			if len(tc.requestID) > maxNativeID {
				// Never echoed: left unanswered, the turn uncertain.
				if !c.Turn().Uncertain {
					t.Fatal("a request left unanswered left the turn certain")
				}
				return
			}
			waitWritten(t, w, `"request_id":"`+tc.requestID+`","subtype":"error"`)
		})
	}
}

func askLine(requestID, toolUseID, command string) string {
	return `{"type":"control_request","request_id":"` + requestID + `","request":{"subtype":"can_use_tool","tool_name":"Bash","display_name":"Bash",` +
		`"input":{"command":"` + command + `"},"description":"` + command + `","tool_use_id":"` + toolUseID + `"}}` + "\n"
}

// TestRepeatedPermissionIDKeepsTheFirst: a permission request that repeats
// a kept one's request id, or whose decision id reads the same as a kept
// one's, never replaces it or stands beside it: the first stays the only
// decision, the repeat is an unavailable duplicate-id event, and allowing
// the first sends the first's request id and input, never the repeat's.
func TestRepeatedPermissionIDKeepsTheFirst(t *testing.T) {
	for _, tc := range []struct {
		name        string
		second      string
		errAnswered string // the repeat's request id when it is answered with an error
	}{
		{"same request id", askLine("r/x", "t2", "rm -rf /"), ""},
		{"same decision id", askLine("r", "x/t", "rm -rf /"), `"request_id":"r","subtype":"error"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pr, pw := io.Pipe()
			w := &lockedWriter{}
			c, err := New(pr, w, testSession, engine.Options{Execution: "x1"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { pw.Close() })
			var evs []protocol.Event
			drained := make(chan struct{})
			go func() {
				defer close(drained)
				for e := range c.Events() {
					evs = append(evs, e)
				}
			}()
			io.WriteString(pw, askLine("r/x", "t", "ls"))
			io.WriteString(pw, tc.second)
			pw.Close()
			<-c.Done()
			<-drained
			ds := c.Decisions()
			if len(ds) != 1 || pairOf(ds[0].ID) != "r/x/t" || !strings.Contains(string(ds[0].Input), `"ls"`) {
				t.Fatalf("decisions %+v, want the first only", ds)
			}
			if !slices.ContainsFunc(evs, func(e protocol.Event) bool {
				return e.Kind == protocol.EventUnavailable && e.Reason == protocol.ReasonDuplicateID
			}) {
				t.Fatalf("events %+v, want an unavailable %s", evs, protocol.ReasonDuplicateID)
			}
			if err := c.Decide(context.Background(), ds[0].ID, engine.ChoiceAllowOnce); err != nil {
				t.Fatal(err)
			}
			// The error answer is written off the reader's goroutine.
			for deadline := time.Now().Add(30 * time.Second); !strings.Contains(w.String(), tc.errAnswered); time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the repeat was not answered with an error: %s", w.String())
				}
			}
			out := w.String()
			if !strings.Contains(out, `"request_id":"r/x"`) || strings.Contains(out, `"behavior":"allow","toolUseID":"x/t"`) ||
				strings.Contains(out, `"updatedInput":{"command":"rm -rf /"}`) || strings.Contains(out, `"request_id":"r/x","subtype":"error"`) {
				t.Fatalf("the CLI read %s", out)
			}
		})
	}
}

// TestEngineIDsBounded: a CLI that invents fresh ids forever (messages
// started and never stopped, tool_use blocks streamed, tools asked and
// never answered) leaves the adapter's per-id state within its bounds;
// past the bound of tools in flight the turn is uncertain rather than a
// tool forgotten.
func TestEngineIDsBounded(t *testing.T) {
	const n = 3 * engine.MaxToolKeys
	start := func(i int) string {
		return fmt.Sprintf(`{"type":"stream_event","api_message_id":"msg_%d","event":{"type":"message_start","message":{"id":"msg_%d","role":"assistant","content":[]}}}`, i, i)
	}
	for _, tc := range []struct {
		name  string
		lines func(i int) []string
		kept  func(c *Conn) (got, bound int)
	}{
		{"messages never stopped", func(i int) []string { return []string{start(i)} },
			func(c *Conn) (int, int) { return c.mp.open.Len(), maxOpenMessages }},
		{"streamed tool calls", func(i int) []string {
			return []string{start(0), fmt.Sprintf(`{"type":"stream_event","api_message_id":"msg_0","event":{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"tu_%d","name":"Bash","input":{}}}}`, i)}
		}, func(c *Conn) (int, int) { return c.mp.tools.Len(), engine.MaxToolKeys }},
		{"tools never answered", func(i int) []string {
			return []string{fmt.Sprintf(`{"type":"assistant","message":{"id":"msg_a%d","role":"assistant","content":[{"type":"tool_use","id":"tu_%d","name":"Bash","input":{}}]}}`, i, i)}
		}, func(c *Conn) (int, int) { return len(c.tr.open), engine.MaxOpenEffects }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pr, pw := io.Pipe()
			c, err := New(pr, &lockedWriter{}, testSession, engine.Options{Execution: "x1"})
			if err != nil {
				t.Fatal(err)
			}
			drained := make(chan struct{})
			go func() {
				defer close(drained)
				for range c.Events() {
				}
			}()
			for i := range n {
				for _, l := range tc.lines(i) {
					io.WriteString(pw, l+"\n")
				}
			}
			pw.Close()
			<-c.Done()
			<-drained
			c.mu.Lock()
			defer c.mu.Unlock()
			if got, bound := tc.kept(c); got > bound {
				t.Fatalf("%d ids kept after %d fresh ones; want at most %d", got, n, bound)
			}
			if tc.name == "tools never answered" && !c.tr.uncertain {
				t.Fatal("tools past the bound left the turn certain")
			}
		})
	}
}

// TestBlockIndexBounded: a content block index outside [0, 4096) from
// the stream is unavailable, never an event addressing that ordinal (a
// client may size an array by it).
func TestBlockIndexBounded(t *testing.T) {
	for _, idx := range []string{"-1", "4096", "2147483648"} {
		t.Run(idx, func(t *testing.T) {
			p := newPeer(t, 5*time.Second)
			p.send(`{"type":"stream_event","api_message_id":"msg_i","event":{"type":"message_start","message":{"id":"msg_i","role":"assistant","content":[]}}}`,
				`{"type":"stream_event","api_message_id":"msg_i","event":{"type":"content_block_start","index":`+idx+`,"content_block":{"type":"text","text":""}}}`,
				`{"type":"stream_event","api_message_id":"msg_i","event":{"type":"content_block_delta","index":`+idx+`,"delta":{"type":"text_delta","text":"x"}}}`,
				`{"type":"stream_event","api_message_id":"msg_i","event":{"type":"message_stop"}}`)
			for {
				e := p.event("the message's end", func(protocol.Event) bool { return true })
				if e.Block != nil && (*e.Block < 0 || *e.Block >= 4096) {
					t.Fatalf("event %+v addresses block %d", e, *e.Block)
				}
				if e.Kind == protocol.EventMessageEnd {
					return
				}
			}
		})
	}
}

// stuckWriter is a CLI's stdin nobody reads: every write blocks until
// Close, which fails it.
type stuckWriter struct {
	closed chan struct{}
	once   sync.Once
}

func newStuckWriter() *stuckWriter { return &stuckWriter{closed: make(chan struct{})} }

func (w *stuckWriter) Write(p []byte) (int, error) {
	<-w.closed
	return 0, io.ErrClosedPipe
}

func (w *stuckWriter) Close() error {
	w.once.Do(func() { close(w.closed) })
	return nil
}

// TestRefusalsBoundedStdinStuck: a CLI that stops reading its stdin and
// asks thousands of requests the adapter refuses (an unsupported
// subtype, a tool use id over the bound, a request id of 64 KiB) leaves
// the adapter's goroutines and queued answers bounded: one writer waits
// on the stuck write, at most maxRefusals answers wait behind it, the
// rest are dropped and the turn is uncertain, and no answer echoes an id
// over maxNativeID. Before, each refusal parked a goroutine holding its
// answer until the write returned: 2,000 of them held 142 MiB.
func TestRefusalsBoundedStdinStuck(t *testing.T) {
	before := runtime.NumGoroutine()
	pr, pw := io.Pipe()
	w := newStuckWriter()
	c, err := New(pr, w, testSession, engine.Options{Execution: "x1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		for range c.Events() {
		}
	}()
	const n = 3000
	long := strings.Repeat("x", 64<<10)
	for i := range n {
		var line string
		switch i % 3 {
		case 0:
			line = fmt.Sprintf(`{"type":"control_request","request_id":"u%d","request":{"subtype":"zz"}}`+"\n", i)
		case 1:
			line = writeLine(fmt.Sprint("r", i), strings.Repeat("t", maxNativeID+1), "x")
		default:
			line = writeLine(fmt.Sprint(long, i), "tu", "x")
		}
		if _, err := io.WriteString(pw, line); err != nil {
			t.Fatal(err)
		}
	}
	pw.Close()
	<-c.Done()
	<-drained
	if got := runtime.NumGoroutine(); got > before+8 {
		t.Fatalf("%d goroutines after %d refused requests to a CLI that does not read, %d before; want one writer", got, n, before)
	}
	if q := len(c.refusals); q > maxRefusals {
		t.Fatalf("%d answers queued; want at most %d", q, maxRefusals)
	}
	if s := c.Turn(); !s.Uncertain {
		t.Fatalf("answers dropped left the turn certain: %+v", s)
	}
}

// TestReaskedRequestIsNewDecision: the CLI asks r/tu with one input,
// withdraws it, pushes it out of the kept decisions with 256 requests
// asked and withdrawn, and asks r/tu again with another input. The
// decision shown for the first keeps its own id: allowing it answers
// nothing (no-turn), never the second request, whose input nobody was
// shown under that id; the second is a new decision under a new id.
// Before, both had the id r/tu, and the allow sent the second input.
func TestReaskedRequestIsNewDecision(t *testing.T) {
	c, pw, w := drainedConn(t)
	ch := c.Changed()
	io.WriteString(pw, askLine("r", "tu", "ls"))
	<-ch
	shown := c.Decisions()
	if len(shown) != 1 || !strings.Contains(string(shown[0].Input), `"ls"`) {
		t.Fatalf("decisions %+v, want the first request", shown)
	}
	io.WriteString(pw, `{"type":"control_cancel_request","request_id":"r"}`+"\n")
	for i := range maxDecisions {
		id := fmt.Sprint("f", i)
		io.WriteString(pw, permissionLine(id))
		io.WriteString(pw, `{"type":"control_cancel_request","request_id":"`+id+`"}`+"\n")
	}
	io.WriteString(pw, askLine("r", "tu", "rm -rf /"))
	pw.Close()
	<-c.Done()
	ds := c.Decisions()
	again := ds[len(ds)-1]
	if again.State != engine.DecisionPending || !strings.Contains(string(again.Input), `"rm -rf /"`) {
		t.Fatalf("last decision %+v, want the request asked again", again)
	}
	if again.ID == shown[0].ID {
		t.Fatalf("the request asked again has the id %s of the one shown before", again.ID)
	}
	wantCode(t, c.Decide(context.Background(), shown[0].ID, engine.ChoiceAllowOnce), protocol.CodeNoTurn)
	if out := w.String(); strings.Contains(out, "rm -rf") || strings.Contains(out, `"behavior":"allow"`) {
		t.Fatalf("the CLI read %s", out)
	}
}

// drainedConn is a Conn fed by the returned pipe (the CLI's stdout),
// writing to the returned writer (its stdin), its events drained.
func drainedConn(t *testing.T) (*Conn, *io.PipeWriter, *lockedWriter) {
	t.Helper()
	pr, pw := io.Pipe()
	w := &lockedWriter{}
	c, err := New(pr, w, testSession, engine.Options{Execution: "x1"})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for range c.Events() {
		}
	}()
	return c, pw, w
}
