package controller

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/activation"
	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/protocol"
)

// quiet says whether k received nothing for d: a negative check, it never
// judges how long something took.
func (k *peer) quiet(d time.Duration) (map[string]any, bool) {
	select {
	case m, ok := <-k.recs:
		if !ok {
			k.t.Fatal("connection closed")
		}
		return m, false
	case <-time.After(d):
		return nil, true
	}
}

// TestWelcomeBeforeStart: served before Start, as `mosaicctl serve` does,
// a hello is answered while the engine is not launched; the connection
// then gets nothing and its commands are not read until Start has
// returned. After it, the first record is the binding Start left, and the
// command sent meanwhile is answered.
func TestWelcomeBeforeStart(t *testing.T) {
	dir := t.TempDir()
	if d, err := filepath.EvalSymlinks(dir); err == nil {
		dir = d
	}
	gate := NewStartGate()
	r := newRigWith(t, dir, `{"turns":[]}`, nil, nil, gate)
	k := r.dial() // the welcome, with Start not even called
	k.send(map[string]any{"type": "observe", "request": "o-1"})
	k.send(map[string]any{"type": "takeover", "request": "t-1", "generation": 0})
	if m, ok := k.quiet(500 * time.Millisecond); !ok {
		t.Fatalf("before Start returned the connection got %v", m)
	}
	if x := r.execution(); x != "" {
		t.Fatalf("an execution %s exists before Start", x)
	}
	if err := r.ctrl.Start(r.ctx); err != nil {
		t.Fatal(err)
	}
	gate.Open(nil)
	first := k.await(func(map[string]any) bool { return true })
	if first["record"] != protocol.RecordBinding || first["execution"] != r.execution() || first["execution"] == "" {
		t.Fatalf("the first record after the welcome is %v, want the binding of execution %s", first, r.execution())
	}
	o := k.await(func(m map[string]any) bool { return m["request"] == "o-1" })
	if o["record"] != protocol.RecordObserved {
		t.Fatalf("the observe sent before Start returned got %v", o)
	}
	// The takeover is judged against the started controller: it takes
	// control of the launched execution's binding.
	tk := k.await(func(m map[string]any) bool { return m["request"] == "t-1" && m["record"] != protocol.RecordBinding })
	if tk["record"] != protocol.RecordControl || tk["controller"] != k.id {
		t.Fatalf("the takeover sent before Start returned got %v, want control", tk)
	}
}

// TestStartFailureRefusesHeld: when Start fails (another controller holds
// the conversation), a connection welcomed meanwhile is refused with
// Start's code and closed, Serve stops accepting and returns the error.
func TestStartFailureRefusesHeld(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.sock")
	l, err := activation.Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	gate := NewStartGate()
	s := &Server{Conversation: "pi-test", Version: "mosaic/test", UID: os.Getuid(), MaxLine: 4096,
		Audit: audit.NewWriter("pi-test", &syncBuffer{}), Started: gate}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, l) }()
	h := &harness{path: path}
	k := h.dial(t)
	if w := k.hello(); w["starting"] != true {
		t.Fatalf("the welcome before the start finished does not say starting: %v", w)
	}
	k.send(`{"type":"probe"}` + "\n")
	gate.Open(protocol.Refuse(protocol.CodeAlreadyActive, "another controller holds conversation pi-test"))
	r := k.read()
	if r["record"] != protocol.RecordRefusal || r["code"] != protocol.CodeAlreadyActive {
		t.Fatalf("held connection got %v, want an already-active refusal", r)
	}
	if !k.closed() {
		t.Fatal("the held connection stayed open")
	}
	select {
	case err := <-done:
		if protocol.CodeOf(err) != protocol.CodeAlreadyActive {
			t.Fatalf("Serve returned %v, want the start's already-active", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve kept serving after the start failed")
	}
	if c, err := net.Dial("unix", path); err == nil {
		c.Close()
		t.Fatal("a connection was accepted after the start failed")
	}
}
