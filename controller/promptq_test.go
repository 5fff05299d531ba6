package controller

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/contrib/fakepi"
	"github.com/mosaic-agents/mosaic/protocol"
)

// queuedCtl is a controller connection that observed and took control.
func (r *rig) queuedCtl() (*peer, float64) {
	r.t.Helper()
	r.waitBinding("active")
	ctl := r.dial()
	ctl.must(map[string]any{"type": "observe", "request": newID("o-")}, "observed")
	return ctl, r.takeover(ctl)
}

// send admits one prompt and returns its receipt, which must say queued.
func (k *peer) queue(gen float64, text string) map[string]any {
	k.t.Helper()
	rc := k.must(map[string]any{"type": "prompt", "request": newID("p-"), "generation": gen, "text": text}, "receipt")
	if rc["state"] != protocol.ReceiptQueued || rc["item"] == nil {
		k.t.Fatalf("prompt %q: %v; want a queued receipt naming its item", text, rc)
	}
	return rc
}

// answered sends cmd (a prompt), which must be queued, and returns the
// receipt revision that ends its wait: acknowledged, failed, ...
func (k *peer) answered(cmd map[string]any) map[string]any {
	k.t.Helper()
	rc := k.must(cmd, "receipt")
	if rc["state"] != protocol.ReceiptQueued {
		k.t.Fatalf("prompt: %v; want queued", rc)
	}
	return k.await(func(m map[string]any) bool {
		return m["record"] == "receipt" && m["request"] == cmd["request"] && m["state"] != protocol.ReceiptQueued && m["state"] != protocol.ReceiptDispatched
	})
}

// receiptState waits for a receipt revision of request in state.
func (k *peer) receiptState(request any, state string) map[string]any {
	k.t.Helper()
	return k.await(func(m map[string]any) bool {
		return m["record"] == "receipt" && m["request"] == request && m["state"] == state
	})
}

// waitItem waits until the controller holds item id in state.
func (r *rig) waitItem(id any, state string) int {
	r.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; sleep20() {
		st, rev := r.item(id)
		if st == state {
			return rev
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("item %v is %s, want %s", id, st, state)
		}
	}
}

// queuePaused reports whether the queue is paused.
func (r *rig) queuePaused() bool {
	r.ctrl.mu.Lock()
	defer r.ctrl.mu.Unlock()
	return r.ctrl.q.paused
}

// item returns the controller's current revision of an item.
func (r *rig) item(id any) (state string, rev int) {
	r.ctrl.mu.Lock()
	defer r.ctrl.mu.Unlock()
	it := r.ctrl.itemLocked(id.(string))
	if it == nil {
		return "", 0
	}
	return it.State, it.Revision
}

// stdinPrompts returns the prompt texts the engine received, in order.
func (r *rig) stdinPrompts() []string {
	var out []string
	for _, line := range strings.Split(r.stdinBytes(), "\n") {
		if i := strings.Index(line, `"message":"`); i >= 0 && strings.Contains(line, `"type":"prompt"`) {
			rest := line[i+len(`"message":"`):]
			out = append(out, rest[:strings.Index(rest, `"`)])
		}
	}
	return out
}

// Prompts sent while a turn runs are admitted (queued, never busy),
// and dispatched one turn each, in order, only after the running turn's
// agent_settled: while the fake holds that settle (Pi already not
// streaming, the digest's gap), nothing is written, even when the
// scheduler is asked directly.
func TestQueueDispatchesAtSettle(t *testing.T) {
	r := newRig(t, `{"turns":[]}`, nil)
	fc := r.fakeControl()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ctl, gen := r.queuedCtl()
	if err := fc.Arm(ctx, fakepi.PointBeforeAgentSettled); err != nil {
		t.Fatal(err)
	}
	a := ctl.queue(gen, "first")
	if _, err := fc.Wait(ctx, fakepi.PointBeforeAgentSettled); err != nil {
		t.Fatal(err)
	}
	b, c := ctl.queue(gen, "second"), ctl.queue(gen, "third")
	// The engine has sent agent_end and is no longer streaming; only its
	// agent_settled is held back. Wait until the controller read agent_end.
	for deadline := time.Now().Add(20 * time.Second); ; sleep20() {
		r.ctrl.mu.Lock()
		ends := r.ctrl.st.exec.conn.State().Ends
		r.ctrl.mu.Unlock()
		if ends > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the controller never read agent_end")
		}
	}
	if r.ctrl.dispatchNext(ctx) {
		t.Fatal("the scheduler dispatched before agent_settled")
	}
	if got := r.prompts(); got != 1 {
		t.Fatalf("%d prompts reached the engine before the first turn settled; want 1", got)
	}
	if st, _ := r.item(b["item"]); st != protocol.ReceiptQueued {
		t.Fatalf("second item is %s before the settle; want queued", st)
	}
	if err := fc.Release(ctx, fakepi.PointBeforeAgentSettled); err != nil {
		t.Fatal(err)
	}
	for _, rc := range []map[string]any{a, b, c} {
		r.waitItem(rc["item"], protocol.ReceiptAcknowledged)
	}
	for deadline := time.Now().Add(20 * time.Second); len(r.stdinPrompts()) < 3 || strings.Count(sessionText(t, r), "Plain answer to: third") < 1; sleep20() {
		if time.Now().After(deadline) {
			t.Fatalf("engine got %v", r.stdinPrompts())
		}
	}
	if got := strings.Join(r.stdinPrompts(), ","); got != "first,second,third" {
		t.Fatalf("engine received %s; want first,second,third, each once", got)
	}
	sess := sessionText(t, r)
	for _, want := range []string{"first", "second", "third"} {
		if n := strings.Count(sess, `"text":"`+want+`"`); n != 1 {
			t.Errorf("session file holds %q %d times; want once", want, n)
		}
	}
}

func sessionText(t *testing.T, r *rig) string {
	t.Helper()
	b, err := os.ReadFile(r.session)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}
