package claude

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/protocol"
)

// peer is a scripted CLI: the test writes its stdout frames and reads
// what the Conn wrote to its stdin, one frame at a time.
type peer struct {
	t    *testing.T
	out  *io.PipeWriter
	in   chan map[string]any
	c    *Conn
	evs  chan protocol.Event
	line chan string
}

func newPeer(t *testing.T, timeout time.Duration) *peer {
	t.Helper()
	return newPeerOpts(t, engine.Options{Execution: "x1", CommandTimeout: timeout, AbortTimeout: timeout})
}

func newPeerOpts(t *testing.T, opts engine.Options) *peer {
	t.Helper()
	or, ow := io.Pipe()
	ir, iw := io.Pipe()
	c, err := New(or, iw, testSession, opts)
	if err != nil {
		t.Fatal(err)
	}
	p := &peer{t: t, out: ow, in: make(chan map[string]any, 64), c: c, evs: make(chan protocol.Event, 1024), line: make(chan string, 64)}
	go func() {
		sc := bufio.NewScanner(ir)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Errorf("the Conn wrote a line that is not JSON: %q", sc.Text())
			}
			p.line <- sc.Text()
			p.in <- m
		}
	}()
	go func() {
		for e := range c.Events() {
			p.evs <- e
		}
		close(p.evs)
	}()
	t.Cleanup(func() { ow.Close(); ir.Close() })
	return p
}

func (p *peer) send(frames ...string) {
	p.t.Helper()
	for _, f := range frames {
		if _, err := io.WriteString(p.out, f+"\n"); err != nil {
			p.t.Fatal(err)
		}
	}
}

// read returns the next frame the Conn wrote.
func (p *peer) read() map[string]any {
	p.t.Helper()
	select {
	case m := <-p.in:
		<-p.line
		return m
	case <-time.After(30 * time.Second):
		p.t.Fatal("the Conn wrote nothing")
		return nil
	}
}

// quiet asserts the Conn writes nothing more for a moment (what it would
// have written is already in the pipe by the time the call returned).
func (p *peer) quiet() {
	p.t.Helper()
	select {
	case m := <-p.in:
		p.t.Fatalf("unexpected write %v", m)
	case <-time.After(200 * time.Millisecond):
	}
}

func (p *peer) event(what string, ok func(protocol.Event) bool) protocol.Event {
	p.t.Helper()
	for {
		select {
		case e, open := <-p.evs:
			if !open {
				p.t.Fatalf("events ended before %s", what)
			}
			if ok(e) {
				return e
			}
		case <-time.After(30 * time.Second):
			p.t.Fatalf("no %s", what)
		}
	}
}

func lifecycle(uuid, state string) string {
	return `{"type":"command_lifecycle","command_uuid":"` + uuid + `","state":"` + state + `","session_id":"` + testSession + `"}`
}

const result = `{"type":"result","subtype":"success","is_error":false,"terminal_reason":"completed","session_id":"` + testSession + `"}`

// startTurn sends a prompt through the Conn, acknowledges and starts it.
func (p *peer) startTurn(text string) string {
	p.t.Helper()
	done := make(chan error, 1)
	go func() { _, err := p.c.Prompt(context.Background(), text); done <- err }()
	m := p.read()
	id, _ := m["uuid"].(string)
	p.send(lifecycle(id, "queued"), lifecycle(id, "started"))
	if err := <-done; err != nil {
		p.t.Fatal(err)
	}
	return id
}

// TestPromptFrameS7: a prompt is one user frame with a fresh uuid and the
// exact text, on one line even with U+2028, ESC and newlines inside.
func TestPromptFrameS7(t *testing.T) {
	p := newPeer(t, 5*time.Second)
	text := "a\u2028b\x1b[31m\nc"
	id := p.startTurn(text)
	if !ValidSession(id) {
		t.Fatalf("uuid %q", id)
	}
	p.send(result)
	p.event("run-settled", func(e protocol.Event) bool { return e.Kind == protocol.EventRunSettled })
	id2 := p.startTurn("again")
	if id2 == id {
		t.Fatal("uuid reused")
	}
}

// TestPromptDeliveryUnknown: no command_lifecycle for the prompt within
// the timeout is delivery-unknown; the slot stays held, so the next
// prompt refuses busy and nothing more is written.
func TestPromptDeliveryUnknown(t *testing.T) {
	p := newPeer(t, 300*time.Millisecond)
	d, err := p.c.Prompt(context.Background(), "hello")
	wantCode(t, err, protocol.CodeDeliveryUnknown)
	if d.Receipt != protocol.ReceiptDeliveryUnknown {
		t.Fatalf("dispatch %+v", d)
	}
	p.read()
	_, err = p.c.Prompt(context.Background(), "second")
	wantCode(t, err, protocol.CodeBusy)
	p.quiet()
}

// TestUnknownFrameE5: an unknown frame type and an unrendered system
// subtype become unavailable events naming the native type; nothing is
// dropped and no payload is carried.
func TestUnknownFrameE5(t *testing.T) {
	p := newPeer(t, time.Second)
	p.send(`{"type":"brand_new_frame","secret":"payload"}`, `{"type":"system","subtype":"task_started","session_id":"`+testSession+`"}`, `not json`)
	e := p.event("unknown", func(e protocol.Event) bool { return e.Kind == protocol.EventUnavailable })
	if e.Reason != protocol.ReasonUnknownNative || e.Native != "brand_new_frame" || e.Text != "" {
		t.Fatalf("event %+v", e)
	}
	e = p.event("unsupported", func(e protocol.Event) bool { return e.Kind == protocol.EventUnavailable })
	if e.Reason != protocol.ReasonUnsupportedNative || e.Native != "system/task_started" {
		t.Fatalf("event %+v", e)
	}
	e = p.event("undecodable", func(e protocol.Event) bool { return e.Kind == protocol.EventUnavailable })
	if e.Reason != protocol.ReasonUndecodable || !p.c.Turn().Uncertain {
		t.Fatalf("event %+v, turn %+v", e, p.c.Turn())
	}
}

// TestForeignSessionUncertain: a frame of another session than the one
// the seal passed makes the binding uncertain.
func TestForeignSessionUncertain(t *testing.T) {
	p := newPeer(t, time.Second)
	p.send(`{"type":"system","subtype":"init","session_id":"99999999-2222-4333-8444-555555555555"}`, `{"type":"keep"}`)
	p.event("the marker", func(e protocol.Event) bool { return e.Native == "keep" })
	if tr := p.c.Turn(); !tr.Uncertain {
		t.Fatalf("turn %+v", tr)
	}
}

// TestSubagentStreamKeptApartL5: a subagent's frames (parent_tool_use_id
// set) never open or extend a main-branch message.
func TestSubagentStreamKeptApartL5(t *testing.T) {
	p := newPeer(t, time.Second)
	p.send(`{"type":"stream_event","parent_tool_use_id":"toolu_1","api_message_id":"msg_s","event":{"type":"message_start","message":{"id":"msg_s","role":"assistant","content":[]}}}`,
		`{"type":"assistant","parent_tool_use_id":"toolu_1","message":{"id":"msg_s","role":"assistant","content":[{"type":"text","text":"SUB"}]}}`)
	for i := 0; i < 2; i++ {
		e := p.event("an event", func(protocol.Event) bool { return true })
		if e.Kind != protocol.EventUnavailable || !strings.HasSuffix(e.Native, "/subagent") {
			t.Fatalf("subagent frame mapped to %+v", e)
		}
	}
}

// TestDecideOnce: the same answer twice writes one response; another
// answer refuses conflicting-request; a choice not offered (a widening
// one) refuses and writes nothing. Allow echoes the model's input.
func TestDecideOnce(t *testing.T) {
	p := newPeer(t, time.Second)
	p.send(`{"type":"control_request","request_id":"r1","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"touch x"},"permission_suggestions":[{"type":"addRules"}],"tool_use_id":"toolu_1"}}`)
	var d engine.NativeDecision
	for d.ID == "" {
		ch := p.c.Changed()
		if ds := p.c.Decisions(); len(ds) > 0 {
			d = ds[0]
			break
		}
		select {
		case <-ch:
		case <-time.After(30 * time.Second):
			t.Fatal("no decision")
		}
	}
	if pairOf(d.ID) != "r1/toolu_1" || d.State != engine.DecisionPending || len(d.Choices) != 2 {
		t.Fatalf("decision %+v", d)
	}
	if !p.c.Turn().Waiting {
		t.Fatal("not waiting for the approval")
	}
	ctx := context.Background()
	wantCode(t, p.c.Decide(ctx, d.ID, "allow-always"), protocol.CodeUnsupported)
	if err := p.c.Decide(ctx, d.ID, engine.ChoiceAllowOnce); err != nil {
		t.Fatal(err)
	}
	m := p.read()
	resp := m["response"].(map[string]any)
	body := resp["response"].(map[string]any)
	if m["type"] != "control_response" || resp["request_id"] != "r1" || body["behavior"] != "allow" || body["toolUseID"] != "toolu_1" {
		t.Fatalf("answer %v", m)
	}
	if in, _ := json.Marshal(body["updatedInput"]); string(in) != `{"command":"touch x"}` {
		t.Fatalf("updatedInput %s", in)
	}
	if _, widened := body["updatedPermissions"]; widened {
		t.Fatal("permissions widened")
	}
	if err := p.c.Decide(ctx, d.ID, engine.ChoiceAllowOnce); err != nil {
		t.Fatalf("the same answer again: %v", err)
	}
	wantCode(t, p.c.Decide(ctx, d.ID, engine.ChoiceDeny), protocol.CodeConflictingRequest)
	p.quiet()
}

// TestInterruptTwiceFenced: while an interrupt waits for its receipt,
// prompts and a second interrupt refuse fenced.
func TestInterruptTwiceFenced(t *testing.T) {
	p := newPeer(t, 5*time.Second)
	done := make(chan engine.TurnProof, 1)
	go func() { pr, _ := p.c.Interrupt(context.Background(), "s1"); done <- pr }()
	m := p.read()
	req := m["request"].(map[string]any)
	if req["subtype"] != "interrupt" || req["cancel_queued"] != true {
		t.Fatalf("interrupt frame %v", m)
	}
	_, err := p.c.Interrupt(context.Background(), "s2")
	wantCode(t, err, protocol.CodeFenced)
	_, err = p.c.Prompt(context.Background(), "x")
	wantCode(t, err, protocol.CodeFenced)
	p.send(`{"type":"control_response","response":{"subtype":"success","request_id":"` + m["request_id"].(string) + `","response":{"still_queued":[]}}}`)
	pr := <-done
	if pr.Uncertain || !pr.AbortAcknowledged || p.c.Turn().Fenced {
		t.Fatalf("idle interrupt proof %+v", pr)
	}
}

// TestInterruptNoReceiptUncertain (N5 on Claude): an interrupt that gets
// no receipt is uncertain with the native queue unknown, and the fence
// stays up: force stop is the way out.
func TestInterruptNoReceiptUncertain(t *testing.T) {
	p := newPeer(t, 300*time.Millisecond)
	p.startTurn("work")
	pr, err := p.c.Interrupt(context.Background(), "s1")
	if err != nil {
		t.Fatal(err)
	}
	p.read()
	if !pr.Uncertain || pr.NativeQueue != engine.QueueUnknown || pr.AbortAcknowledged || pr.Dispatch == nil {
		t.Fatalf("proof %+v", pr)
	}
	if tr := p.c.Turn(); !tr.Fenced || tr.Slot == nil {
		t.Fatalf("turn %+v: fence and slot must stay", tr)
	}
	_, err = p.c.Prompt(context.Background(), "x")
	wantCode(t, err, protocol.CodeFenced)
}

// TestInterruptApprovalNotWithdrawnP6: an interrupt while a permission
// request is pending, where the CLI never withdraws it, leaves the proof
// uncertain and the decision pending: never answered as a denial on the
// user's behalf.
func TestInterruptApprovalNotWithdrawnP6(t *testing.T) {
	p := newPeer(t, 2*time.Second)
	p.startTurn("BASH{touch x}")
	ch := p.c.Changed()
	p.send(`{"type":"control_request","request_id":"r1","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{},"tool_use_id":"toolu_1"}}`)
	<-ch
	done := make(chan engine.TurnProof, 1)
	go func() { pr, _ := p.c.Interrupt(context.Background(), "s1"); done <- pr }()
	m := p.read()
	p.send(`{"type":"control_response","response":{"subtype":"success","request_id":"`+m["request_id"].(string)+`","response":{"still_queued":[]}}}`,
		`{"type":"result","subtype":"error_during_execution","is_error":true,"terminal_reason":"aborted_tools","session_id":"`+testSession+`"}`)
	pr := <-done
	if !pr.Uncertain || pr.TerminalReason != "aborted_tools" {
		t.Fatalf("proof %+v", pr)
	}
	if d := p.c.Decisions()[0]; d.State != engine.DecisionPending {
		t.Fatalf("decision %+v", d)
	}
	p.quiet()
}

// TestInterruptCancelsQueuedItem: the slot's item reported in the
// receipt's cancelled list is proven unconsumed (R3-1 on Claude); an
// unknown uuid there is external.
func TestInterruptCancelsQueuedItem(t *testing.T) {
	p := newPeer(t, 2*time.Second)
	done := make(chan error, 1)
	go func() { _, err := p.c.Prompt(context.Background(), "queued item"); done <- err }()
	id := p.read()["uuid"].(string)
	p.send(lifecycle(id, "queued"))
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	pdone := make(chan engine.TurnProof, 1)
	go func() { pr, _ := p.c.Interrupt(context.Background(), "s1"); pdone <- pr }()
	m := p.read()
	p.send(lifecycle(id, "cancelled"), `{"type":"control_response","response":{"subtype":"success","request_id":"`+m["request_id"].(string)+`","response":{"still_queued":[],"cancelled":["`+id+`","00000000-0000-4000-8000-0000000000ff"]}}}`)
	pr := <-pdone
	if pr.Uncertain || len(pr.ItemsMatched) != 1 || pr.ItemsMatched[0].Text != "queued item" || len(pr.External) != 1 || !pr.Dispatch.Unconsumed {
		t.Fatalf("proof %+v", pr)
	}
	if tr := p.c.Turn(); tr.Slot != nil || tr.Fenced {
		t.Fatalf("turn %+v", tr)
	}
}

// TestCutRequestDenyOnly: a permission request whose line framing had to
// cut (a command over the in-memory bound) can only be denied: allowing
// would send the cut input back as updatedInput, and the CLI runs that.
func TestCutRequestDenyOnly(t *testing.T) {
	p := newPeerOpts(t, engine.Options{Execution: "x1", MaxLine: 4096, CommandTimeout: time.Second})
	cmd := "echo " + strings.Repeat("A", 2<<20) + " && rm -rf ~/important"
	ch := p.c.Changed()
	p.send(`{"type":"control_request","request_id":"r1","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"` + cmd + `"},"tool_use_id":"toolu_1"}}`)
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatal("no decision")
	}
	d := p.c.Decisions()[0]
	if len(d.Choices) != 1 || d.Choices[0] != engine.ChoiceDeny {
		t.Fatalf("a cut request offers %v", d.Choices)
	}
	wantCode(t, p.c.Decide(context.Background(), d.ID, engine.ChoiceAllowOnce), protocol.CodeUnsupported)
	p.quiet()
	if err := p.c.Decide(context.Background(), d.ID, engine.ChoiceDeny); err != nil {
		t.Fatal(err)
	}
	if m := p.read(); m["response"].(map[string]any)["response"].(map[string]any)["behavior"] != "deny" {
		t.Fatalf("answer %v", m)
	}
}

// TestTurnCountsSettles: Turn().Settles counts every run-settled event
// the Conn queued, and already counts one by the time a reader of Events
// sees it (the controller's queue compares it with what its pump
// published); a frame mapped to no run-settled counts nothing.
func TestTurnCountsSettles(t *testing.T) {
	p := newPeer(t, 5*time.Second)
	if n := p.c.Turn().Settles; n != 0 {
		t.Fatalf("settles before any turn = %d", n)
	}
	for i := 1; i <= 3; i++ {
		p.startTurn("turn")
		p.send(result)
		p.event("run-settled", func(e protocol.Event) bool { return e.Kind == protocol.EventRunSettled })
		if n := p.c.Turn().Settles; n != i {
			t.Fatalf("after run-settled %d: Turn().Settles = %d", i, n)
		}
	}
	// A subagent's result is mapped to unavailable, not run-settled.
	p.send(`{"type":"result","subtype":"success","parent_tool_use_id":"toolu_sub","session_id":"` + testSession + `"}`)
	p.event("unavailable", func(e protocol.Event) bool { return e.Kind == protocol.EventUnavailable })
	if n := p.c.Turn().Settles; n != 3 {
		t.Fatalf("after a subagent result: Turn().Settles = %d, want 3", n)
	}
}
