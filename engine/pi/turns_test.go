package pi

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/protocol"
)

// TestPromptAckBeforeStart: the prompt's response arrives before
// agent_start (rpc-mode.js:298); the slot stays held through a retry (two
// agent_end, one agent_settled) and is released only at the settle.
func TestPromptAckBeforeStart(t *testing.T) {
	p := startPeer(t, engine.Options{})
	const text = "PLAIN hello"
	p.acked(text)
	if s := p.conn.State(); s.Slot == nil || s.Slot.Started || s.Running {
		t.Fatalf("after ack: %+v", s)
	}
	if _, err := p.conn.Prompt(context.Background(), "PLAIN second"); code(err) != "busy" {
		t.Fatalf("second prompt while slot held: %v", err)
	}
	p.sync() // zero bytes for the refused prompt

	p.emit(`{"type":"agent_start"}`, `{"type":"turn_start"}`)
	p.emit(userMessage(text)...)
	p.emit(`{"type":"message_start","message":{"role":"assistant","content":[],"stopReason":"pending"}}`,
		`{"type":"message_end","message":{"role":"assistant","content":[],"stopReason":"error","errorMessage":"overloaded"}}`,
		`{"type":"turn_end","message":{},"toolResults":[]}`,
		`{"type":"agent_end","messages":[],"willRetry":true}`,
		`{"type":"auto_retry_start","attempt":1,"maxAttempts":3,"delayMs":10,"errorMessage":"overloaded"}`)
	p.sync()
	if s := p.conn.State(); !s.Running || !s.WillRetry || s.Ends != 1 || s.Slot == nil || !s.Slot.Started {
		t.Fatalf("in retry window: %+v", s)
	}
	if _, err := p.conn.Prompt(context.Background(), "PLAIN during retry"); code(err) != "busy" {
		t.Fatalf("prompt in retry window: %v", err)
	}
	p.emit(`{"type":"agent_start"}`, `{"type":"turn_start"}`)
	p.emit(assistantMessage("retried answer")...)
	p.emit(`{"type":"turn_end","message":{},"toolResults":[]}`,
		`{"type":"auto_retry_end","success":true,"attempt":1}`,
		`{"type":"agent_end","messages":[],"willRetry":false}`)
	p.sync()
	if s := p.conn.State(); !s.Running || s.Slot == nil || s.Ends != 2 {
		t.Fatalf("after second agent_end: %+v", s)
	}
	p.emit(`{"type":"agent_settled"}`)
	p.sync()
	s := p.conn.State()
	if s.Running || s.Slot != nil || s.Last == nil || !s.Last.Started || s.Runs != 2 || s.Settles != 1 {
		t.Fatalf("after settle: %+v", s)
	}
	events := p.drain()
	settled := 0
	for _, e := range events {
		if e.Kind == protocol.EventRunSettled {
			settled++
		}
	}
	if settled != 1 {
		t.Fatalf("%d run-settled events, want 1", settled)
	}
	if got := p.stdinPrompts(); !slices.Equal(got, []string{text}) {
		t.Fatalf("prompts written %q", got)
	}
}

// TestN6: Pi refuses a prompt because it is streaming. The receipt is
// failed with Pi's text verbatim, the text is kept for an explicit resend,
// and the slot is free again.
func TestN6(t *testing.T) {
	p := startPeer(t, engine.Options{})
	const text = "PLAIN interrupt"
	r := p.goPrompt(text)
	p.refuse(p.next("prompt"), busyText)
	res := recv(t, r)
	if code(res.err) != "engine-refused" {
		t.Fatalf("err %v", res.err)
	}
	var ne *engine.NativeError
	if !errors.As(res.err, &ne) || ne.Text != busyText {
		t.Fatalf("native evidence lost: %v", res.err)
	}
	if res.d.Receipt != protocol.ReceiptFailed || res.d.Evidence != busyText || res.d.Text != text {
		t.Fatalf("dispatch %+v", res.d)
	}
	if s := p.conn.State(); s.Slot != nil || s.Last == nil || s.Last.Receipt != protocol.ReceiptFailed {
		t.Fatalf("state %+v", s)
	}
	p.acked("PLAIN resend") // the slot is free for an explicit resend
}

// TestN1: a prompt accepted during a retry window the controller had not
// seen yet ends up in Pi's queue; Interrupt sends clear_queue before
// abort, the returned text matches the one item exactly once, the receipt
// stays acknowledged, the proof lists it, and nothing is resent.
func TestN1(t *testing.T) {
	p := startPeer(t, engine.Options{})
	const text = "PLAIN follow me"
	p.acked(text,
		`{"type":"agent_start"}`, `{"type":"turn_start"}`,
		`{"type":"message_end","message":{"role":"assistant","content":[],"stopReason":"error"}}`,
		`{"type":"agent_end","messages":[],"willRetry":true}`,
		`{"type":"auto_retry_start","attempt":1,"maxAttempts":3,"delayMs":2000,"errorMessage":"overloaded"}`)
	p.queue(text)
	p.sync()

	proofCh := p.goInterrupt("stop-1")
	p.serveStop(false)
	proof := recv(t, proofCh)

	if got := p.stdinTypes(); !slices.Equal(got, []string{"prompt", "get_state", "clear_queue", "abort"}) {
		t.Fatalf("stdin order %q, want clear_queue before abort", got)
	}
	if proof.Uncertain || proof.NativeQueue != engine.QueueCleared || !proof.AbortAcknowledged {
		t.Fatalf("proof %+v", proof)
	}
	if len(proof.ItemsMatched) != 1 || proof.ItemsMatched[0].Text != text || len(proof.External) != 0 {
		t.Fatalf("matched %+v external %+v", proof.ItemsMatched, proof.External)
	}
	if d := proof.Dispatch; d == nil || d.Receipt != protocol.ReceiptAcknowledged || !d.Unconsumed || d.Started {
		t.Fatalf("dispatch %+v", proof.Dispatch)
	}
	if proof.InterruptedRun != 1 || proof.StopRef != "stop-1" || proof.Execution != "exec-t" {
		t.Fatalf("proof identity %+v", proof)
	}
	if s := p.conn.State(); s.Fenced || s.Slot != nil {
		t.Fatalf("after a certain proof: %+v", s)
	}
	for _, e := range p.drain() {
		if e.Kind == protocol.EventMessageStart && e.Role == "user" {
			t.Fatalf("the queued item ran: %+v", e)
		}
	}
	if got := p.stdinPrompts(); len(got) != 1 {
		t.Fatalf("prompt resent: %q", got)
	}
}

// TestN3: clear_queue returns an extension's follow-up: it is recorded as
// external, attributed to no request, and the proof is certain.
func TestN3(t *testing.T) {
	p := startPeer(t, engine.Options{})
	p.emit(`{"type":"agent_start"}`, `{"type":"turn_start"}`)
	p.queue("extension follow-up")
	p.sync()
	proofCh := p.goInterrupt("stop-3")
	p.serveStop(false)
	proof := recv(t, proofCh)
	want := []engine.QueuedText{{Queue: "followUp", Text: "extension follow-up"}}
	if proof.Uncertain || !slices.Equal(proof.External, want) || len(proof.ItemsMatched) != 0 || proof.Dispatch != nil {
		t.Fatalf("proof %+v", proof)
	}
}

// TestN4: the item's text comes back twice, or only nearly: no proof, the
// receipt becomes delivery-unknown, the proof is uncertain and the fence
// stays (a prompt refuses fenced).
func TestN4(t *testing.T) {
	const text = "PLAIN follow me"
	tests := []struct {
		name   string
		queued []string
	}{
		{"twice", []string{text, text}},
		{"trimmed", []string{"  " + text + "\n"}},
		{"case", []string{strings.ToUpper(text)}},
		{"contained", []string{text + " (edited)"}},
		{"exact plus near", []string{text, text + "!"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := startPeer(t, engine.Options{})
			p.acked(text)
			p.queue(tc.queued...)
			p.sync()
			proofCh := p.goInterrupt("stop-4")
			p.serveStop(false)
			proof := recv(t, proofCh)
			if !proof.Uncertain || len(proof.ItemsMatched) != 0 || len(proof.Ambiguous) != len(tc.queued) {
				t.Fatalf("proof %+v", proof)
			}
			if proof.Dispatch == nil || proof.Dispatch.Receipt != protocol.ReceiptDeliveryUnknown || proof.Dispatch.Unconsumed {
				t.Fatalf("dispatch %+v", proof.Dispatch)
			}
			if s := p.conn.State(); !s.Fenced {
				t.Fatalf("fence lifted: %+v", s)
			}
			if _, err := p.conn.Prompt(context.Background(), "PLAIN next"); code(err) != "fenced" {
				t.Fatalf("prompt after uncertain stop: %v", err)
			}
		})
	}
}

// TestN5: clear_queue times out: nativeQueue unknown, the stop is
// uncertain, abort is never sent (it would run the unknown queue), and
// admission stays closed.
func TestN5(t *testing.T) {
	p := startPeer(t, engine.Options{CommandTimeout: 200 * time.Millisecond})
	p.acked("PLAIN hello")
	proofCh := p.goInterrupt("stop-5")
	p.serveStop(true)
	proof := recv(t, proofCh)
	if proof.NativeQueue != engine.QueueUnknown || !proof.Uncertain || proof.AbortAcknowledged {
		t.Fatalf("proof %+v", proof)
	}
	if proof.Dispatch == nil || proof.Dispatch.Receipt != protocol.ReceiptDeliveryUnknown {
		t.Fatalf("dispatch %+v", proof.Dispatch)
	}
	if s := p.conn.State(); !s.Fenced {
		t.Fatalf("fence lifted: %+v", s)
	}
	if _, err := p.conn.Prompt(context.Background(), "PLAIN next"); code(err) != "fenced" {
		t.Fatalf("prompt after N5: %v", err)
	}
	p.sync()
	if got := p.stdinTypes(); slices.Contains(got, "abort") {
		t.Fatalf("abort sent after clear_queue failed: %q", got)
	}
}

// TestInterruptOpenTool: a tool that started and never ended at stop time
// is an uncertain effect in the proof.
func TestInterruptOpenTool(t *testing.T) {
	p := startPeer(t, engine.Options{})
	p.emit(`{"type":"agent_start"}`,
		`{"type":"tool_execution_start","toolCallId":"call_9","toolName":"bash","args":{"command":"setsid sleep 300"}}`,
		`{"type":"tool_execution_start","toolCallId":"call_8","toolName":"read","args":{}}`,
		`{"type":"tool_execution_end","toolCallId":"call_8","toolName":"read","result":{},"isError":false}`)
	p.sync()
	proofCh := p.goInterrupt("stop-6")
	p.serveStop(false)
	proof := recv(t, proofCh)
	want := []engine.Effect{{CallID: "call_9", Name: "bash", State: "uncertain"}}
	if !slices.Equal(proof.Effects, want) {
		t.Fatalf("effects %+v", proof.Effects)
	}
}

// TestInterruptTwice: a second interrupt while one runs refuses fenced.
func TestInterruptTwice(t *testing.T) {
	p := startPeer(t, engine.Options{})
	first := p.goInterrupt("a")
	p.next("clear_queue")
	if _, err := p.conn.Interrupt(context.Background(), "b"); code(err) != "fenced" {
		t.Fatalf("second interrupt: %v", err)
	}
	p.emit(queueLine(nil, nil), `{"id":"clear_queue-1","type":"response","command":"clear_queue","success":true,"data":{"steering":[],"followUp":[]}}`)
	p.respond(p.next("abort"), nil)
	if proof := recv(t, first); proof.Uncertain {
		t.Fatalf("proof %+v", proof)
	}
}

// TestBusyWhileRunning: a visible run refuses busy with zero bytes.
func TestBusyWhileRunning(t *testing.T) {
	p := startPeer(t, engine.Options{})
	p.emit(`{"type":"agent_start"}`)
	p.sync()
	if _, err := p.conn.Prompt(context.Background(), "PLAIN x"); code(err) != "busy" {
		t.Fatalf("got %v", err)
	}
	p.sync()
	if got := p.stdinPrompts(); len(got) != 0 {
		t.Fatalf("bytes reached the engine: %q", got)
	}
}

// TestPromptTimeout: no response leaves the slot held, delivery unknown.
func TestPromptTimeout(t *testing.T) {
	p := startPeer(t, engine.Options{CommandTimeout: 100 * time.Millisecond})
	r := p.goPrompt("PLAIN hello")
	cmd := p.next("prompt")
	res := recv(t, r)
	if code(res.err) != protocol.ReceiptDeliveryUnknown || res.d.Receipt != protocol.ReceiptDeliveryUnknown {
		t.Fatalf("got %+v %v", res.d, res.err)
	}
	if s := p.conn.State(); s.Slot == nil {
		t.Fatal("slot released on timeout")
	}
	p.respond(cmd, nil) // late answer still lands on the slot
	p.sync()
	if s := p.conn.State(); s.Slot == nil || s.Slot.Receipt != protocol.ReceiptAcknowledged {
		t.Fatalf("late ack: %+v", s.Slot)
	}
}

// TestLineTooLongMakesUncertain: an over-long line is an unavailable
// event, the binding becomes uncertain and prompts refuse; later lines
// still decode.
func TestLineTooLongMakesUncertain(t *testing.T) {
	p := startPeer(t, engine.Options{MaxLine: 128, LineLimit: 256})
	p.emit(`{"type":"message_update","assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":"`+strings.Repeat("x", 500)+`"}}`,
		`{"type":"agent_settled"}`)
	p.sync()
	if s := p.conn.State(); !s.Uncertain {
		t.Fatalf("state %+v", s)
	}
	if _, err := p.conn.Prompt(context.Background(), "PLAIN x"); code(err) != "fenced" {
		t.Fatalf("prompt: %v", err)
	}
	events := p.drain()
	if len(events) != 2 || events[0].Reason != protocol.ReasonLineTooLong || events[1].Kind != protocol.EventRunSettled || events[1].Seq != 2 {
		t.Fatalf("events %+v", events)
	}
}

// TestStrayLines: a parse-error response (no id) and a non-JSON line are
// unavailable events, never dropped.
func TestStrayLines(t *testing.T) {
	p := startPeer(t, engine.Options{})
	p.emit(`{"type":"response","command":"parse","success":false,"error":"Failed to parse command"}`, `garbage`)
	events := p.drain()
	if len(events) != 2 || events[0].Reason != "uncorrelated-response" || events[1].Reason != protocol.ReasonUndecodable {
		t.Fatalf("events %+v", events)
	}
}

// TestStdinOnlyClosedByClose: the engine's stdout ending fails pending
// commands but never closes its stdin; Close does.
func TestStdinOnlyClosedByClose(t *testing.T) {
	p := startPeer(t, engine.Options{})
	r := make(chan error, 1)
	go func() { _, err := p.conn.GetState(context.Background()); r <- err }()
	p.next("get_state")
	p.out.Close()
	if err := recv(t, r); !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("pending command after EOF: %v", err)
	}
	<-p.conn.Done()
	p.mu.Lock()
	eof := p.eof
	p.mu.Unlock()
	if eof {
		t.Fatal("stdin closed without Close")
	}
	if err := p.conn.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case _, ok := <-p.cmds:
		if ok {
			t.Fatal("unexpected command")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("stdin not closed by Close")
	}
}
