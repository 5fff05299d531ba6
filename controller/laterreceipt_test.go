package controller

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	mclient "github.com/mosaic-agents/mosaic/client"
	"github.com/mosaic-agents/mosaic/protocol"
)

// TestLaterReceiptFollowsAdmissionReply: another connection changes a
// prompt's item between its admission and the queueing of its reply (it
// takes control and cancels the item, or force stops, which drafts it).
// The item's later receipt goes to the connection that queued it, and
// the client takes the first receipt naming its request for the reply:
// it must say queued, revision 1, and the later one must follow it.
func TestLaterReceiptFollowsAdmissionReply(t *testing.T) {
	for _, tc := range []struct {
		name, state string
		act         func(ctx context.Context, other *mclient.Client, item string) error
	}{
		{"cancelled by the next controller", protocol.ReceiptCancelled, func(ctx context.Context, other *mclient.Client, item string) error {
			_, err := other.CancelQueued(ctx, item, 1)
			return err
		}},
		{"drafted by the next controller's force stop", protocol.ReceiptDraft, func(ctx context.Context, other *mclient.Client, item string) error {
			id, err := other.Confirm(ctx, protocol.CmdForceStop)
			if err != nil {
				return err
			}
			_, err = other.ForceStop(ctx, id)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, plainScript, nil)
			r.waitBinding("active")
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			// The other connection acts in the window, once: the hook
			// runs for its own commands too. It is set before any
			// command runs; other is set before the hook is armed.
			var other *mclient.Client
			var armed atomic.Bool
			acted := make(chan error, 1)
			r.ctrl.test.beforeReply = func() {
				if !armed.CompareAndSwap(true, false) {
					return
				}
				r.ctrl.mu.Lock()
				head := r.ctrl.headLocked()
				r.ctrl.mu.Unlock()
				if head == nil {
					acted <- nil
					return
				}
				if _, err := other.Takeover(ctx); err != nil {
					acted <- err
					return
				}
				acted <- tc.act(ctx, other, head.ID)
			}
			c := controlling(t, ctx, r)
			other, err := mclient.Dial(ctx, r.sock, mclient.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { other.Close() })
			if _, err := other.Observe(ctx); err != nil {
				t.Fatal(err)
			}
			armed.Store(true)
			eq, err := c.Enqueue(ctx, "queued in the window")
			if err := <-acted; err != nil {
				t.Fatalf("the other connection's change in the window: %v", err)
			}
			if err != nil || eq.State != protocol.ReceiptQueued || eq.Revision != 1 {
				t.Fatalf("Enqueue = %+v, %v; want the queued receipt, revision 1", eq, err)
			}
			for u := range c.Updates() {
				if rc := u.Receipt; rc != nil && rc.Item == eq.Item && rc.State == tc.state {
					return
				}
			}
			t.Fatalf("the connection closed before the %s receipt of item %s", tc.state, eq.Item)
		})
	}
}
