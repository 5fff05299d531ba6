package controller

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/engine/pi"
	"github.com/mosaic-agents/mosaic/protocol"
)

// Pinned Pi answers a prompt without streamingBehavior that lands while
// it is processing with "Agent is already processing" (DIGEST §2): the
// prompt was not taken. The item stays queued at the head, no other item
// overtakes it, and it is written again only after the next agent_settled.
// The engine here is a scripted peer on pipes, the one way to make Pi
// busy behind the controller's back (in the field: an extension's run).
func TestQueueNativeBusyKeepsHead(t *testing.T) {
	dir := t.TempDir()
	store, err := claims.Open(filepath.Join(dir, "state", "claims"))
	if err != nil {
		t.Fatal(err)
	}
	cv := &conversations.Conversation{ID: "pi-nativebusy", Session: filepath.Join(dir, "s.jsonl")}
	c := New(Config{Conversation: cv, Claims: store, Audit: audit.NewWriter(cv.ID, io.Discard)})
	c.loadQueue()

	inR, inW := io.Pipe()   // controller -> peer
	outR, outW := io.Pipe() // peer -> controller
	conn, err := pi.New(outR, inW, engine.Options{Execution: "e-1"})
	if err != nil {
		t.Fatal(err)
	}
	x := &execution{id: "e-1", conn: conn}
	c.bus.reset(x.id)
	go c.pump(x)
	c.mu.Lock()
	c.st.exec, c.st.binding, c.st.admission, c.st.controller = x, protocol.BindingActive, true, "k-1"
	c.q.gen, c.q.exec = c.st.generation, x.id
	c.mu.Unlock()

	prompts := make(chan string, 8)
	var busy atomic.Bool
	busy.Store(true)
	go func() {
		sc := bufio.NewScanner(inR)
		for sc.Scan() {
			var cmd struct{ ID, Type, Message string }
			json.Unmarshal(sc.Bytes(), &cmd)
			prompts <- cmd.Message
			reply := `{"id":"` + cmd.ID + `","type":"response","command":"prompt","success":true}` + "\n"
			if busy.Load() {
				reply = `{"id":"` + cmd.ID + `","type":"response","command":"prompt","success":false,"error":"Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') to queue the message."}` + "\n"
			}
			io.WriteString(outW, reply)
		}
	}()

	addItems(t, c, 1, "head", "behind")
	ctx := ctx20(t)
	if c.dispatchNext(ctx) {
		t.Fatal("a refused dispatch reported progress")
	}
	if got := <-prompts; got != "head" {
		t.Fatalf("first write %q; want the head", got)
	}
	c.mu.Lock()
	head := *c.headLocked()
	c.mu.Unlock()
	if head.Current().Text != "head" || head.State != protocol.ReceiptQueued || !strings.Contains(head.Reason, "already processing") {
		t.Fatalf("head after Pi's busy answer: %+v; want it queued again, saying why", head)
	}
	if c.dispatchNext(ctx); len(prompts) != 0 {
		t.Fatal("written again before the next agent_settled")
	}

	busy.Store(false)
	// The scheduler ends before the temp dir is removed: it writes there.
	sctx, stop := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { c.schedule(sctx); close(stopped) }()
	t.Cleanup(func() { stop(); outW.Close(); inW.Close(); <-stopped })
	io.WriteString(outW, `{"type":"agent_start"}`+"\n"+`{"type":"agent_end","messages":[]}`+"\n"+`{"type":"agent_settled"}`+"\n")
	if got := <-prompts; got != "head" {
		t.Fatalf("after agent_settled the engine got %q; want the head again", got)
	}
	outW.Close()
	inW.Close()
}
