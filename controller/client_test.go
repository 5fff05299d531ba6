package controller

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	mclient "github.com/mosaic-agents/mosaic/client"
	"github.com/mosaic-agents/mosaic/protocol"
)

// The client library against the real controller (fake Pi, real scope):
// what the terminal and one-shot verbs build on.
func TestClientLibraryAgainstController(t *testing.T) {
	r := newRig(t, plainScript, nil)
	r.waitBinding("active")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := controlling(t, ctx, r)
	rc, err := c.Prompt(ctx, "hello from the library")
	if err != nil || rc.State != protocol.ReceiptAcknowledged {
		t.Fatalf("Prompt = %+v, %v", rc, err)
	}
	for u := range c.Updates() {
		if u.Event != nil && u.Event.Kind == protocol.EventRunSettled {
			break
		}
	}
	// Enqueue returns at queued; the queue record every client holds
	// follows the item to acknowledged; an answered item can no longer be
	// cancelled, and resume answers the queue.
	eq, err := c.Enqueue(ctx, "queued from the library")
	if err != nil || eq.State != protocol.ReceiptQueued || eq.Item == "" {
		t.Fatalf("Enqueue = %+v, %v", eq, err)
	}
	for range c.Updates() {
		if q := c.State().Queue; q != nil && len(q.Items) > 0 && q.Items[len(q.Items)-1].ID == eq.Item && q.Items[len(q.Items)-1].State == protocol.ReceiptAcknowledged {
			break
		}
	}
	if _, err := c.CancelQueued(ctx, eq.Item, 3); protocol.CodeOf(err) != protocol.CodeItemDispatched {
		t.Fatalf("CancelQueued of an answered item: %v; want item-dispatched", err)
	}
	if q, err := c.ResumeQueue(ctx); err != nil || q.Paused {
		t.Fatalf("ResumeQueue = %+v, %v", q, err)
	}
	for u := range c.Updates() {
		if u.Event != nil && u.Event.Kind == protocol.EventRunSettled {
			break
		}
	}
	if _, err := c.Prompt(ctx, "/goal no"); protocol.CodeOf(err) != protocol.CodeTextPolicy {
		t.Fatalf("slash prompt: %v; want a text-policy refusal", err)
	}
	id, err := c.Confirm(ctx, protocol.CmdForceStop)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := c.ForceStop(ctx, id)
	if err != nil || fs.State != protocol.ReceiptStopped {
		t.Fatalf("ForceStop = %+v, %v", fs, err)
	}
	rid, err := c.Confirm(ctx, protocol.CmdRecover)
	if err != nil {
		t.Fatal(err)
	}
	el, err := c.Recover(ctx, rid)
	if err != nil {
		t.Fatal(err)
	}
	lr, err := c.Launch(ctx, el.ID)
	if err != nil || lr.State != protocol.ReceiptLaunched {
		t.Fatalf("Launch = %+v, %v", lr, err)
	}
}

// TestEnqueueAnsweredBeforeDispatch: a run that settles while a prompt is
// admitted kicks the scheduler before the prompt's reply is queued; the
// item waits for its reply, so it is not dispatched in that window, the
// receipt that answers the prompt says queued (revision 1) and the
// dispatched one follows it. (A dispatched receipt made in the window
// would follow the reply anyway, held as another connection's change is:
// TestLaterReceiptFollowsAdmissionReply; the dispatch itself must wait.)
func TestEnqueueAnsweredBeforeDispatch(t *testing.T) {
	r := newRig(t, plainScript, nil)
	r.waitBinding("active")
	// The scheduler gets its chance in the window, as the settle's kick
	// does under load; a second is ample for a dispatch that may happen.
	var armed, early atomic.Bool
	r.ctrl.test.beforeReply = func() {
		if !armed.Load() {
			return
		}
		for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			r.ctrl.kickQueue()
			r.ctrl.mu.Lock()
			head := r.ctrl.headLocked()
			moved := head == nil || head.State != protocol.ReceiptQueued
			r.ctrl.mu.Unlock()
			if moved {
				early.Store(true)
				return
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := controlling(t, ctx, r)
	armed.Store(true)
	eq, err := c.Enqueue(ctx, "queued in the window")
	if err != nil || eq.State != protocol.ReceiptQueued || eq.Revision != 1 {
		t.Fatalf("Enqueue = %+v, %v; want the queued receipt, revision 1", eq, err)
	}
	if early.Load() {
		t.Fatal("the item left the queue before its admission reply was queued")
	}
	for u := range c.Updates() {
		if u.Event != nil && u.Event.Kind == protocol.EventRunSettled {
			break
		}
	}
}

// controlling is a client-library connection to r's controller that
// observes and holds control, closed when the test ends.
func controlling(t *testing.T, ctx context.Context, r *rig) *mclient.Client {
	t.Helper()
	c, err := mclient.Dial(ctx, r.sock, mclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Observe(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Takeover(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}
