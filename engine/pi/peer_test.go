package pi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/protocol"
)

// busyText is pinned Pi's refusal of a prompt while streaming (recording 02).
const busyText = "Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') to queue the message."

// peer is a scripted in-test Pi: the test reads each command the Conn
// writes and answers with lines shaped like the pinned recordings. It
// keeps a native queue so abort behaves as Pi's does: it runs whatever is
// still queued (rpc.md:158; recording 04).
type peer struct {
	t    *testing.T
	conn *Conn
	out  *io.PipeWriter
	cmds chan map[string]any

	mu       sync.Mutex
	stdin    [][]byte
	events   []protocol.Event
	eof      bool
	steering []string
	followUp []string
	evDone   chan struct{}
}

func startPeer(t *testing.T, opts engine.Options) *peer {
	t.Helper()
	if opts.Execution == "" {
		opts.Execution = "exec-t"
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c, err := New(outR, inW, opts)
	if err != nil {
		t.Fatal(err)
	}
	p := &peer{t: t, conn: c, out: outW, cmds: make(chan map[string]any, 64), evDone: make(chan struct{})}
	go func() {
		lr := engine.NewLineReader(inR, 16<<20) // a prompt record can pass the default bound
		for {
			line, err := lr.Next()
			if err != nil {
				p.mu.Lock()
				p.eof = errors.Is(err, io.EOF)
				p.mu.Unlock()
				close(p.cmds)
				return
			}
			p.mu.Lock()
			p.stdin = append(p.stdin, append([]byte(nil), line...))
			p.mu.Unlock()
			var m map[string]any
			if err := json.Unmarshal(line, &m); err != nil {
				t.Errorf("engine stdin got a non-JSON record %q", line)
				continue
			}
			p.cmds <- m
		}
	}()
	go func() {
		defer close(p.evDone)
		for e := range c.Events() {
			p.mu.Lock()
			p.events = append(p.events, e)
			p.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		outW.Close()
		<-p.evDone
		inR.Close()
	})
	return p
}

// next returns the next command the Conn wrote and checks its type.
func (p *peer) next(typ string) map[string]any {
	p.t.Helper()
	select {
	case m, ok := <-p.cmds:
		if !ok {
			p.t.Fatalf("stdin closed while waiting for %s", typ)
		}
		if m["type"] != typ {
			p.t.Fatalf("engine got %v, want %s", m["type"], typ)
		}
		return m
	case <-time.After(5 * time.Second):
		p.t.Fatalf("no %s command", typ)
	}
	return nil
}

// emit writes raw lines to the Conn.
func (p *peer) emit(lines ...string) {
	p.t.Helper()
	for _, l := range lines {
		if _, err := io.WriteString(p.out, l+"\n"); err != nil {
			p.t.Fatalf("emit: %v", err)
		}
	}
}

func (p *peer) respond(cmd map[string]any, data any) {
	p.t.Helper()
	r := map[string]any{"id": cmd["id"], "type": "response", "command": cmd["type"], "success": true}
	if data != nil {
		r["data"] = data
	}
	b, _ := json.Marshal(r)
	p.emit(string(b))
}

func (p *peer) refuse(cmd map[string]any, text string) {
	p.t.Helper()
	b, _ := json.Marshal(map[string]any{"id": cmd["id"], "type": "response", "command": cmd["type"], "success": false, "error": text})
	p.emit(string(b))
}

// queue puts texts into the native follow-up queue and reports it.
func (p *peer) queue(followUp ...string) {
	p.t.Helper()
	p.mu.Lock()
	p.followUp = append(p.followUp, followUp...)
	line := queueLine(p.steering, p.followUp)
	p.mu.Unlock()
	p.emit(line)
}

func queueLine(steering, followUp []string) string {
	b, _ := json.Marshal(map[string]any{"type": "queue_update", "steering": nonNil(steering), "followUp": nonNil(followUp)})
	return string(b)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// sync proves nothing else was written: it sends get_state and expects
// get_state to be the next record on stdin.
func (p *peer) sync() {
	p.t.Helper()
	done := make(chan error, 1)
	go func() { _, err := p.conn.GetState(context.Background()); done <- err }()
	p.respond(p.next("get_state"), map[string]any{"isStreaming": false})
	if err := <-done; err != nil {
		p.t.Fatalf("get_state: %v", err)
	}
}

// serveStop answers clear_queue and abort in whatever order they come,
// as pinned Pi does: clear_queue returns and empties the queues (with a
// queue_update before its response); abort ends the run, then runs every
// message still queued, then settles and answers (recordings 03 and 04).
// It returns once both were handled; with ignoreClear a clear_queue is
// never answered and it returns then.
func (p *peer) serveStop(ignoreClear bool) {
	p.t.Helper()
	cleared, aborted := false, false
	for !cleared || !aborted {
		var m map[string]any
		select {
		case m = <-p.cmds:
		case <-time.After(5 * time.Second):
			p.t.Fatalf("no stop command")
		}
		switch m["type"] {
		case "clear_queue":
			if ignoreClear {
				return
			}
			p.mu.Lock()
			data := map[string]any{"steering": nonNil(p.steering), "followUp": nonNil(p.followUp)}
			p.steering, p.followUp = nil, nil
			p.mu.Unlock()
			p.emit(queueLine(nil, nil))
			p.respond(m, data)
			cleared = true
		case "abort":
			p.emit(`{"type":"agent_end","messages":[],"willRetry":false}`)
			p.mu.Lock()
			queued := append(append([]string(nil), p.steering...), p.followUp...)
			p.steering, p.followUp = nil, nil
			p.mu.Unlock()
			for _, text := range queued {
				p.emit(`{"type":"agent_start"}`, `{"type":"turn_start"}`, queueLine(nil, nil))
				p.emit(userMessage(text)...)
				p.emit(assistantMessage("Plain answer to: " + text)...)
				p.emit(`{"type":"turn_end","message":{},"toolResults":[]}`, `{"type":"agent_end","messages":[],"willRetry":false}`)
			}
			p.emit(`{"type":"agent_settled"}`)
			p.respond(m, nil)
			aborted = true
		default:
			p.t.Fatalf("unexpected command during stop: %v", m["type"])
		}
	}
}

func (p *peer) stdinTypes() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, l := range p.stdin {
		var m map[string]any
		_ = json.Unmarshal(l, &m)
		out = append(out, fmt.Sprint(m["type"]))
	}
	return out
}

func (p *peer) stdinPrompts() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, l := range p.stdin {
		var m map[string]any
		_ = json.Unmarshal(l, &m)
		if m["type"] == "prompt" {
			out = append(out, m["message"].(string))
		}
	}
	return out
}

// drain closes the engine's stdout and returns every event delivered.
func (p *peer) drain() []protocol.Event {
	p.out.Close()
	<-p.evDone
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.events
}

func userMessage(text string) []string {
	b, _ := json.Marshal(map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": text}}, "timestamp": 1})
	return []string{`{"type":"message_start","message":` + string(b) + `}`, `{"type":"message_end","message":` + string(b) + `}`}
}

func assistantMessage(text string) []string {
	start := `{"type":"message_start","message":{"role":"assistant","content":[],"stopReason":"pending","timestamp":2}}`
	delta, _ := json.Marshal(map[string]any{"type": "message_update", "assistantMessageEvent": map[string]any{"type": "text_delta", "contentIndex": 0, "delta": text}})
	end, _ := json.Marshal(map[string]any{"type": "message_end", "message": map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": text}}, "stopReason": "stop", "timestamp": 2}})
	return []string{start, `{"type":"message_update","assistantMessageEvent":{"type":"text_start","contentIndex":0}}`, string(delta),
		`{"type":"message_update","assistantMessageEvent":{"type":"text_end","contentIndex":0,"content":""}}`, string(end)}
}

type promptResult struct {
	d   engine.Dispatch
	err error
}

func (p *peer) goPrompt(text string) chan promptResult {
	ch := make(chan promptResult, 1)
	go func() {
		d, err := p.conn.Prompt(context.Background(), text)
		ch <- promptResult{d, err}
	}()
	return ch
}

func (p *peer) goInterrupt(ref string) chan engine.TurnProof {
	ch := make(chan engine.TurnProof, 1)
	go func() {
		proof, err := p.conn.Interrupt(context.Background(), ref)
		if err != nil {
			p.t.Errorf("Interrupt: %v", err)
		}
		ch <- proof
	}()
	return ch
}

func recv[T any](t *testing.T, ch chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("timed out")
	}
	var zero T
	return zero
}

// acked dispatches text and acknowledges it; extra lines go out between
// reading the prompt and answering it.
func (p *peer) acked(text string, before ...string) engine.Dispatch {
	p.t.Helper()
	r := p.goPrompt(text)
	cmd := p.next("prompt")
	if _, ok := cmd["streamingBehavior"]; ok {
		p.t.Fatalf("prompt carries streamingBehavior: %v", cmd)
	}
	if cmd["message"] != text {
		p.t.Fatalf("prompt message %q, want %q", cmd["message"], text)
	}
	p.emit(before...)
	p.respond(cmd, nil)
	res := recv(p.t, r)
	if res.err != nil || res.d.Receipt != protocol.ReceiptAcknowledged {
		p.t.Fatalf("prompt: %+v %v", res.d, res.err)
	}
	return res.d
}

func code(err error) string { return protocol.CodeOf(err) }
