package controller

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/contrib/fakepi"
	"github.com/mosaic-agents/mosaic/engine/pi"
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

// queue admits one prompt and returns the first receipt the connection
// reads for it, which must name its item: queued, or already dispatched
// or acknowledged when the scheduler's revision overtook the reply
// (controller/doc.go: order on one connection is not revision order).
func (k *peer) queue(gen float64, text string) map[string]any {
	k.t.Helper()
	rc := k.must(map[string]any{"type": "prompt", "request": newID("p-"), "generation": gen, "text": text}, "receipt")
	switch {
	case rc["item"] == nil:
		k.t.Fatalf("prompt %q: %v; want a receipt naming its item", text, rc)
	case rc["state"] != protocol.ReceiptQueued && rc["state"] != protocol.ReceiptDispatched && rc["state"] != protocol.ReceiptAcknowledged:
		k.t.Fatalf("prompt %q: %v; want queued (or a later revision of it)", text, rc)
	}
	return rc
}

// answered sends cmd (a prompt), which must be queued, and returns the
// receipt revision that ends its wait: acknowledged, failed, ...
func (k *peer) answered(cmd map[string]any) map[string]any {
	k.t.Helper()
	rc := k.must(cmd, "receipt")
	switch rc["state"] {
	case protocol.ReceiptQueued, protocol.ReceiptDispatched:
	default: // a later revision overtook the reply (see queue)
		if rc["item"] == nil {
			k.t.Fatalf("prompt: %v; want a receipt naming its item", rc)
		}
		return rc
	}
	return k.await(func(m map[string]any) bool {
		return m["record"] == "receipt" && m["request"] == cmd["request"] && m["state"] != protocol.ReceiptQueued && m["state"] != protocol.ReceiptDispatched
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
		ends := r.ctrl.st.exec.conn.(*pi.Conn).State().Ends
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

// holdFirstTurn makes ctl the controller and sends a first prompt whose
// run the fake holds just before agent_settled, so later prompts queue.
func (r *rig) holdFirstTurn(ctx context.Context, fc *fakepi.Control) (*peer, float64, map[string]any) {
	r.t.Helper()
	ctl, gen := r.queuedCtl()
	if err := fc.Arm(ctx, fakepi.PointBeforeAgentSettled); err != nil {
		r.t.Fatal(err)
	}
	a := ctl.queue(gen, "first")
	if _, err := fc.Wait(ctx, fakepi.PointBeforeAgentSettled); err != nil {
		r.t.Fatal(err)
	}
	return ctl, gen, a
}

// Edit and cancel are compare-and-set on the item revision: an edit makes
// a new frozen payload and keeps the original's digest; a stale revision
// refuses stale-item; an item that left the queue refuses item-dispatched
// naming its state; the edited text is what reaches the engine, the
// cancelled item never does (mutant 24).
func TestQueueEditCancelCompareAndSet(t *testing.T) {
	r := newRig(t, `{"turns":[]}`, nil)
	fc := r.fakeControl()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ctl, gen, _ := r.holdFirstTurn(ctx, fc)
	b, c := ctl.queue(gen, "second draft"), ctl.queue(gen, "third")

	q := ctl.must(map[string]any{"type": "edit-queued", "request": "e1", "generation": gen, "item": b["item"], "revision": 1, "text": "second final"}, "queue")
	var edited map[string]any
	for _, it := range q["items"].([]any) {
		if m := it.(map[string]any); m["id"] == b["item"] {
			edited = m
		}
	}
	if edited == nil || edited["revision"] != float64(2) || edited["text"] != "second final" || edited["edits"] != float64(1) ||
		edited["original"] == edited["digest"] {
		t.Fatalf("edited item %v; want revision 2, the new text, one edit, the original digest kept", edited)
	}
	ctl.refused(map[string]any{"type": "edit-queued", "request": "e2", "generation": gen, "item": b["item"], "revision": 1, "text": "lost update"}, protocol.CodeStaleItem)
	ctl.refused(map[string]any{"type": "cancel-queued", "request": "c0", "generation": gen, "item": c["item"], "revision": 2}, protocol.CodeStaleItem)
	ctl.must(map[string]any{"type": "cancel-queued", "request": "c1", "generation": gen, "item": c["item"], "revision": 1}, "queue")
	m := ctl.refused(map[string]any{"type": "cancel-queued", "request": "c2", "generation": gen, "item": c["item"], "revision": 2}, protocol.CodeItemDispatched)
	if !strings.Contains(m["message"].(string), protocol.ReceiptCancelled) {
		t.Fatalf("refusal %v does not say the item is cancelled", m)
	}
	ctl.refused(map[string]any{"type": "cancel-queued", "request": "c3", "generation": gen, "item": "qi-0000000000000000", "revision": 1}, protocol.CodeUnknownItem)

	if err := fc.Release(ctx, fakepi.PointBeforeAgentSettled); err != nil {
		t.Fatal(err)
	}
	r.waitItem(b["item"], protocol.ReceiptAcknowledged)
	ctl.refused(map[string]any{"type": "edit-queued", "request": "e3", "generation": gen, "item": b["item"], "revision": 4, "text": "too late"}, protocol.CodeItemDispatched)
	if got := strings.Join(r.stdinPrompts(), ","); got != "first,second final" {
		t.Fatalf("engine received %s; want first,second final", got)
	}
}

// An edit racing the dispatch of its item: whichever takes the queue
// first wins. Here the dispatch is held after it chose the item, so the
// edit waits for it and is refused item-dispatched: the engine gets the
// text as it was when the dispatch won, never a mix.
func TestQueueEditLosesToDispatch(t *testing.T) {
	r := newRig(t, `{"turns":[]}`, nil)
	fc := r.fakeControl()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ctl, gen, _ := r.holdFirstTurn(ctx, fc)
	b := ctl.queue(gen, "second")
	chosen, proceed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	r.ctrl.test.beforeDispatch = func() {
		once.Do(func() { close(chosen); <-proceed })
	}
	if err := fc.Release(ctx, fakepi.PointBeforeAgentSettled); err != nil {
		t.Fatal(err)
	}
	select {
	case <-chosen:
	case <-ctx.Done():
		t.Fatalf("the dispatch never chose the item; the engine received %v", r.stdinPrompts())
	}
	res := make(chan map[string]any, 1)
	go func() {
		res <- ctl.reply(map[string]any{"type": "edit-queued", "request": "e1", "generation": gen, "item": b["item"], "revision": 1, "text": "edited"})
	}()
	close(proceed)
	if m := <-res; m["code"] != protocol.CodeItemDispatched {
		t.Fatalf("edit racing the dispatch: %v; want item-dispatched", m)
	}
	r.waitItem(b["item"], protocol.ReceiptAcknowledged)
	if got := strings.Join(r.stdinPrompts(), ","); got != "first,second" {
		t.Fatalf("engine received %s; want first,second", got)
	}
}

// An interrupt stops the turn and pauses the queue: the queued item stays,
// nothing more is sent, until the controller resumes; then it runs.
func TestQueueInterruptPausesUntilResume(t *testing.T) {
	r := newRig(t, `{"turns":[{"endless":true,"chunkDelayMs":20}]}`, nil)
	ctl, gen := r.queuedCtl()
	ctl.queue(gen, "go")
	ctl.await(func(m map[string]any) bool { return m["kind"] == "text-delta" })
	b := ctl.queue(gen, "next")
	rc := ctl.must(map[string]any{"type": "interrupt", "request": "i1", "generation": gen}, "receipt")
	if rc["state"] != protocol.ReceiptReconciled {
		t.Fatalf("interrupt: %v", rc)
	}
	if !r.queuePaused() {
		t.Fatal("the queue is not paused after an interrupt")
	}
	r.waitBindingField("admission", "open")
	r.ctrl.dispatchNext(ctx20(t))
	if st, _ := r.item(b["item"]); st != protocol.ReceiptQueued || r.prompts() != 1 {
		t.Fatalf("after the interrupt the item is %s and the engine got %d prompts; want queued and 1", st, r.prompts())
	}
	ctl.must(map[string]any{"type": "resume-queue", "request": "r1", "generation": gen}, "queue")
	r.waitItem(b["item"], protocol.ReceiptAcknowledged)
	if got := strings.Join(r.stdinPrompts(), ","); got != "go,next" {
		t.Fatalf("engine received %s; want go,next", got)
	}
}

// A resume journals what it did: the pause it lifted, or, on a queue that
// was not paused, that there was nothing to resume (never "was paused: "
// with no reason) while dispatch is authorised under its generation.
func TestQueueResumeJournal(t *testing.T) {
	for _, tc := range []struct {
		name, field, want string
		pause             bool
	}{
		{name: "after an interrupt", pause: true, field: "resumed", want: "(was paused: interrupt s-"},
		{name: "not paused", field: "authorised", want: "the queue was not paused, nothing to resume; dispatch authorised under generation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, `{"turns":[{"endless":true,"chunkDelayMs":20}]}`, nil)
			ctl, gen := r.queuedCtl()
			if tc.pause {
				ctl.queue(gen, "go")
				ctl.await(func(m map[string]any) bool { return m["kind"] == "text-delta" })
				ctl.queue(gen, "next")
				ctl.must(map[string]any{"type": "interrupt", "request": "i1", "generation": gen}, "receipt")
				if !r.queuePaused() {
					t.Fatal("the queue is not paused after an interrupt")
				}
			}
			// The reply says what the journal says: notPaused when there
			// was nothing to resume, so the client can tell its user.
			q := ctl.must(map[string]any{"type": "resume-queue", "request": "r1", "generation": gen}, "queue")
			if notPaused, _ := q["notPaused"].(bool); notPaused == tc.pause {
				t.Fatalf("resume reply %v; want notPaused %v", q, !tc.pause)
			}
			var got []string
			for _, e := range r.audit.entries(t) {
				if e["MOSAIC_QUEUE"] == "resumed" || e["MOSAIC_QUEUE"] == "authorised" {
					got = append(got, e["MOSAIC_QUEUE"]+": "+e["MESSAGE"])
				}
			}
			if len(got) != 1 || !strings.HasPrefix(got[0], tc.field+": ") || !strings.Contains(got[0], tc.want) || strings.Contains(got[0], "was paused: )") {
				t.Fatalf("journaled %q; want one %s entry containing %q", got, tc.field, tc.want)
			}
		})
	}
}

// A force stop turns every queued item into a recovered draft, listed in
// the stop record, and sends none of them.
func TestQueueForceStopRecoversDrafts(t *testing.T) {
	r := newRig(t, `{"turns":[{"endless":true,"chunkDelayMs":20}]}`, nil)
	ctl, gen := r.queuedCtl()
	ctl.queue(gen, "go")
	ctl.await(func(m map[string]any) bool { return m["kind"] == "text-delta" })
	b, c := ctl.queue(gen, "two"), ctl.queue(gen, "three")
	cf := ctl.confirm("force-stop", gen)
	rc := ctl.must(map[string]any{"type": "force-stop", "request": "f1", "generation": gen, "confirmation": cf}, "receipt")
	if rc["state"] != protocol.ReceiptStopped {
		t.Fatalf("force stop: %v", rc)
	}
	s := currentStop(r)
	if strings.Join(s.QueueDrafts, ",") != b["item"].(string)+","+c["item"].(string) || len(s.QueueFailures) != 0 {
		t.Fatalf("stop drafts %v failures %v; want %v %v and none", s.QueueDrafts, s.QueueFailures, b["item"], c["item"])
	}
	for _, it := range []map[string]any{b, c} {
		if st, _ := r.item(it["item"]); st != protocol.ReceiptDraft {
			t.Fatalf("item %v is %s; want draft", it["item"], st)
		}
	}
	if got := strings.Join(r.stdinPrompts(), ","); got != "go" {
		t.Fatalf("engine received %s; want only go", got)
	}
}

// A takeover keeps the queue: the items keep their original actor and
// connection, the new controller may cancel them, and (being the same
// actor) the rest goes on in order under the new generation.
func TestQueueTakeoverKeepsQueue(t *testing.T) {
	r := newRig(t, `{"turns":[]}`, nil)
	fc := r.fakeControl()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	old, gen, _ := r.holdFirstTurn(ctx, fc)
	b, c := old.queue(gen, "queued by the old controller"), old.queue(gen, "cancelled by the new one")
	nw := r.dial()
	nw.must(map[string]any{"type": "observe", "request": "o2"}, "observed")
	gen2 := r.takeover(nw)
	if r.queuePaused() {
		t.Fatal("a takeover by the same actor paused the queue")
	}
	nw.must(map[string]any{"type": "cancel-queued", "request": "c1", "generation": gen2, "item": c["item"], "revision": 1}, "queue")
	old.refused(map[string]any{"type": "cancel-queued", "request": "c2", "generation": gen, "item": b["item"], "revision": 1}, protocol.CodeRevoked)
	if err := fc.Release(ctx, fakepi.PointBeforeAgentSettled); err != nil {
		t.Fatal(err)
	}
	r.waitItem(b["item"], protocol.ReceiptAcknowledged)
	r.ctrl.mu.Lock()
	it := *r.ctrl.itemLocked(b["item"].(string))
	r.ctrl.mu.Unlock()
	if it.Connection != old.id || it.Actor != Actor || it.Generation != int64(gen) || it.Dispatch.Generation != int64(gen2) {
		t.Fatalf("item after takeover: connection %s actor %s generation %d dispatched at %d; want the original %s %s %v, dispatched at %v",
			it.Connection, it.Actor, it.Generation, it.Dispatch.Generation, old.id, Actor, gen, gen2)
	}
	if got := strings.Join(r.stdinPrompts(), ","); got != "first,queued by the old controller" {
		t.Fatalf("engine received %s", got)
	}
}

// The dedup index of prompts is durable: after a controller restart an
// exact retry returns the item's current receipt and dispatches nothing;
// the same id with other content still refuses.
func TestQueueRetryAfterRestart(t *testing.T) {
	r := newRig(t, `{"turns":[]}`, nil)
	ctl, gen := r.queuedCtl()
	cmd := map[string]any{"type": "prompt", "request": "p1", "generation": gen, "execution": r.execution(), "text": "once"}
	rc := ctl.answered(cmd)
	ctl.settled()
	fp := func(m map[string]any) string {
		raw, _ := json.Marshal(m)
		var c protocol.Command
		json.Unmarshal(raw, &c)
		return fingerprint(&c)
	}
	restarted := New(r.cfg) // what a new controller process reads
	restarted.loadQueue()
	line, ref := restarted.dedupBegin("p1", fp(cmd), true)
	var got protocol.Receipt
	if ref != nil || json.Unmarshal(line, &got) != nil || got.ID != rc["id"] || got.Item != rc["item"] {
		t.Fatalf("exact retry after a restart: %s %v; want receipt %v", line, ref, rc["id"])
	}
	if got.State != protocol.ReceiptDelivered {
		t.Fatalf("retry receipt state %s; want delivered (the session file holds the text)", got.State)
	}
	other := map[string]any{"type": "prompt", "request": "p1", "generation": gen, "execution": r.execution(), "text": "other"}
	if _, ref := restarted.dedupBegin("p1", fp(other), true); ref == nil || ref.Code != protocol.CodeConflictingRequest {
		t.Fatalf("conflicting retry after a restart: %v; want conflicting-request", ref)
	}
	if n := r.prompts(); n != 1 {
		t.Fatalf("engine received %d prompts; want 1", n)
	}
}

func ctx20(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}
