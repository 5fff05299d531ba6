package pi

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/protocol"
)

// These tests run the adapter against a real engine process: the fake Pi
// always, the real pinned Pi when MOSAIC_PI is set. Where the two differ
// the real binary wins.

func (r *rig) waitState(ok func(TurnState) bool) TurnState {
	r.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		s := r.conn.State()
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("state not reached: %+v", s)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// staleView makes the adapter forget the run it saw, as if the engine's
// output had not been read yet: the only way a prompt reaches a busy Pi
// past the dispatch slot.
func (r *rig) staleView() {
	r.conn.mu.Lock()
	r.conn.tr.running = false
	r.conn.tr.release()
	r.conn.mu.Unlock()
}

func (r *rig) prompt(text string) engine.Dispatch {
	r.t.Helper()
	d, err := r.conn.Prompt(context.Background(), text)
	if err != nil || d.Receipt != protocol.ReceiptAcknowledged {
		r.t.Fatalf("prompt %q: %+v %v", text, d, err)
	}
	return d
}

// TestEngineSmoke: the sealed engine answers the read commands and an
// idle clear_queue and abort with no prompt sent.
func TestEngineSmoke(t *testing.T) {
	realPiNote(t)
	for _, eng := range engines(t) {
		t.Run(eng, func(t *testing.T) {
			r := startRig(t, eng, stubmodel.Script{}, engine.Options{}, false)
			ctx := context.Background()
			st, err := r.conn.GetState(ctx)
			if err != nil || st.IsStreaming || !strings.HasSuffix(st.SessionFile, "s1.jsonl") {
				t.Fatalf("get_state %+v %v", st, err)
			}
			cmds, err := r.conn.GetCommands(ctx)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("get_commands under the seal: %+v", cmds)
			if q, err := r.conn.ClearQueue(ctx); err != nil || len(q.Steering)+len(q.FollowUp) != 0 {
				t.Fatalf("clear_queue %+v %v", q, err)
			}
			if err := r.conn.Abort(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := r.conn.GetTree(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := r.conn.GetEntries(ctx, ""); err != nil {
				t.Fatal(err)
			}
			var ne *engine.NativeError
			if _, err := r.conn.GetEntries(ctx, "nosuchid"); !errors.As(err, &ne) {
				t.Fatalf("get_entries with unknown since: %v", err)
			}
		})
	}
}

// TestEngineE1: send, acknowledge, user, toolCall, toolResult, new final
// answer; the stream alone rebuilds every message exactly once.
func TestEngineE1(t *testing.T) {
	realPiNote(t)
	script := stubmodel.Script{Turns: []stubmodel.Turn{
		{Text: []string{"Hello! ", "I will ", "run it."}, Tool: &stubmodel.ToolCall{Command: "echo started"}},
		{Text: []string{"Tool said: ", "started"}},
	}}
	for _, eng := range engines(t) {
		t.Run(eng, func(t *testing.T) {
			r := startRig(t, eng, script, engine.Options{}, false)
			r.prompt("PLAIN run the tool")
			r.waitEvent(kind(protocol.EventRunSettled))
			events := r.snapshot()
			text := map[string]string{}
			var roles []string
			var finals []protocol.Event
			tools := map[protocol.EventKind]int{}
			for i, e := range events {
				if e.Seq != uint64(i+1) {
					t.Fatalf("seq gap at %d: %d", i, e.Seq)
				}
				switch e.Kind {
				case protocol.EventUnavailable:
					t.Fatalf("unavailable event %+v", e)
				case protocol.EventTextDelta:
					text[e.Message] += e.Text
				case protocol.EventMessageEnd:
					roles = append(roles, e.Role)
					finals = append(finals, e)
				case protocol.EventToolStart, protocol.EventToolUpdate, protocol.EventToolEnd:
					tools[e.Kind]++
				}
			}
			if !slices.Equal(roles, []string{"user", "assistant", "toolResult", "assistant"}) {
				t.Fatalf("message roles %q", roles)
			}
			if tools[protocol.EventToolStart] != 1 || tools[protocol.EventToolEnd] != 1 || tools[protocol.EventToolUpdate] < 1 {
				t.Fatalf("tool events %v", tools)
			}
			for _, f := range finals {
				if f.Role != "assistant" {
					continue
				}
				var final string
				for _, b := range f.Content {
					if b.Type == "text" {
						final += b.Text
					}
				}
				if final != text[f.Message] {
					t.Fatalf("message %s deltas %q final %q", f.Message, text[f.Message], final)
				}
			}
			if got := text[finals[3].Message]; got != "Tool said: started" {
				t.Fatalf("new final answer %q", got)
			}
			s := r.conn.State()
			if s.Running || s.Slot != nil || s.Last == nil || !s.Last.Started || len(s.OpenTools) != 0 {
				t.Fatalf("state after settle %+v", s)
			}
		})
	}
}

// TestEngineN6: a prompt that reaches Pi while it streams is refused with
// Pi's own text, kept verbatim as evidence; the stop afterwards is clean.
func TestEngineN6(t *testing.T) {
	realPiNote(t)
	script := stubmodel.Script{Turns: []stubmodel.Turn{{Endless: true}}}
	for _, eng := range engines(t) {
		t.Run(eng, func(t *testing.T) {
			r := startRig(t, eng, script, engine.Options{}, false)
			r.prompt("PLAIN long")
			r.waitEvent(kind(protocol.EventTextDelta))
			r.staleView()
			const text = "PLAIN interrupt"
			d, err := r.conn.Prompt(context.Background(), text)
			var ne *engine.NativeError
			if code(err) != "engine-refused" || !errors.As(err, &ne) || ne.Text != busyText {
				t.Fatalf("got %v", err)
			}
			if d.Receipt != protocol.ReceiptFailed || d.Evidence != busyText || d.Text != text {
				t.Fatalf("dispatch %+v", d)
			}
			proof, err := r.conn.Interrupt(context.Background(), "stop-n6")
			if err != nil || proof.Uncertain || !proof.AbortAcknowledged {
				t.Fatalf("interrupt %+v %v", proof, err)
			}
		})
	}
}

// TestEngineRetryWindow is N1's step on the pinned engine: a prompt that
// reaches Pi between agent_end(willRetry) and the retry. Pinned Pi counts
// the retry window as streaming (agent-session.js:616,772), so it refuses
// the prompt (N6's evidence) instead of queueing it; Interrupt still sends
// clear_queue before abort and finds nothing of Mosaic's in the queue.
func TestEngineRetryWindow(t *testing.T) {
	realPiNote(t)
	script := stubmodel.Script{Turns: []stubmodel.Turn{
		{Error: "503 overloaded", Status: 503, Retryable: true},
		{Endless: true},
	}}
	for _, eng := range engines(t) {
		t.Run(eng, func(t *testing.T) {
			r := startRig(t, eng, script, engine.Options{}, false)
			r.prompt("PLAIN first")
			r.waitState(func(s TurnState) bool { return s.WillRetry })
			r.staleView()
			const text = "PLAIN in the retry window"
			if _, err := r.conn.Prompt(context.Background(), text); code(err) != "engine-refused" {
				t.Fatalf("prompt in retry window: %v", err)
			}
			proof, err := r.conn.Interrupt(context.Background(), "stop-n1")
			if err != nil || proof.Uncertain || proof.NativeQueue != engine.QueueCleared || len(proof.ItemsMatched)+len(proof.External)+len(proof.Ambiguous) != 0 {
				t.Fatalf("proof %+v %v", proof, err)
			}
			types := r.stdinTypes()
			if ci, ai := slices.Index(types, "clear_queue"), slices.Index(types, "abort"); ci < 0 || ai < ci {
				t.Fatalf("stdin order %q", types)
			}
			for _, e := range r.snapshot() {
				if e.Kind == protocol.EventMessageStart && e.Role == "user" && strings.Contains(e.Message, "retry window") {
					t.Fatalf("refused prompt ran")
				}
			}
		})
	}
}

// TestEngineN3: an extension's follow-up sits in Pi's queue at interrupt:
// recorded as external, attributed to nothing, not run. Fake only: under
// the seal the real Pi loads no extension that could queue one.
func TestEngineN3(t *testing.T) {
	script := stubmodel.Script{Turns: []stubmodel.Turn{
		{Text: []string{"working"}, Tool: &stubmodel.ToolCall{Command: "echo hi"}, FollowUp: "extension follow-up"},
		{Endless: true},
	}}
	r := startRig(t, "fake", script, engine.Options{}, false)
	r.prompt("PLAIN go")
	r.waitState(func(s TurnState) bool { return slices.Contains(s.Queue.FollowUp, "extension follow-up") })
	r.waitEvent(func(e protocol.Event) bool { return e.Kind == protocol.EventTextDelta && e.Text == "w0 " })
	proof, err := r.conn.Interrupt(context.Background(), "stop-n3")
	want := []engine.QueuedText{{Queue: "followUp", Text: "extension follow-up"}}
	if err != nil || proof.Uncertain || !slices.Equal(proof.External, want) || len(proof.ItemsMatched) != 0 {
		t.Fatalf("proof %+v %v", proof, err)
	}
	if proof.Dispatch == nil || !proof.Dispatch.Started {
		t.Fatalf("dispatch %+v", proof.Dispatch)
	}
	for _, e := range r.snapshot() {
		if e.Kind == protocol.EventMessageEnd && e.Role == "user" && len(e.Content) > 0 && e.Content[0].Text == "extension follow-up" {
			t.Fatal("the external follow-up ran after interrupt")
		}
	}
}

// TestEngineN5: clear_queue's answer does not arrive in time (the
// engine's stdout is held): nativeQueue unknown, uncertain, no abort,
// admission closed.
func TestEngineN5(t *testing.T) {
	realPiNote(t)
	script := stubmodel.Script{Turns: []stubmodel.Turn{{Endless: true}}}
	for _, eng := range engines(t) {
		t.Run(eng, func(t *testing.T) {
			r := startRig(t, eng, script, engine.Options{}, false)
			r.prompt("PLAIN long") // Pi's first answer can take a while after start
			r.waitEvent(kind(protocol.EventTextDelta))
			r.conn.opts.CommandTimeout = 500 * time.Millisecond
			r.gate.hold()
			proof, err := r.conn.Interrupt(context.Background(), "stop-n5")
			r.gate.open()
			if err != nil || proof.NativeQueue != engine.QueueUnknown || !proof.Uncertain || proof.AbortAcknowledged {
				t.Fatalf("proof %+v %v", proof, err)
			}
			if slices.Contains(r.stdinTypes(), "abort") {
				t.Fatalf("abort sent: %q", r.stdinTypes())
			}
			if _, err := r.conn.Prompt(context.Background(), "PLAIN next"); code(err) != "fenced" {
				t.Fatalf("prompt after N5: %v", err)
			}
		})
	}
}
