package controller

import (
	"context"
	"errors"
	"fmt"

	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/queue"
)

// schedule dispatches the head of the queue whenever something that may
// let it go happens (a run settled, an item was admitted, the queue was
// resumed), until the controller closes.
func (c *Controller) schedule(ctx context.Context) {
	for {
		select {
		case <-c.q.kick:
		case <-c.closing:
			return
		case <-ctx.Done():
			return
		}
		for c.dispatchNext(ctx) {
		}
	}
}

// readyLocked says whether the head may be written to the engine now: the
// queue is not paused, no native dialog is open, admission is open (the
// same predicate a prompt meets), and the engine is idle: no run from
// agent_start to agent_settled, no prompt holding the dispatch slot, and
// every agent_settled the engine connection counted has been through the
// pump (so the bus holds the previous turn's last event). Never agent_end:
// retries and queued continuations follow it (DIGEST §3.3-3.4).
func (c *Controller) readyLocked() (*execution, bool) {
	x := c.st.exec
	if c.q.paused || c.nativeDialogOpenLocked() || c.admissionLocked() != nil || x == nil || x.conn == nil {
		return nil, false
	}
	ts := x.conn.Turn()
	if c.q.hold && c.q.heldExec != x.id {
		c.q.hold = false
	}
	if ts.Running || ts.Slot != nil || ts.Settles != x.settled || (c.q.hold && x.settled <= c.q.heldAt) {
		return nil, false
	}
	c.q.hold = false
	return x, true
}

// dispatchNext writes the head item to the engine if it may go now, and
// reports whether the queue moved (so the scheduler looks again). The
// order is what makes a crash safe: the dispatched revision is durable
// before the engine write, so a restarted controller settles the item
// from the session file and never writes it again. The queue lock is
// released once the dispatched revision is committed: admission, edits,
// cancels and a force stop's drafts do not wait for the engine's reply
// (the dispatched head is no longer theirs to change); the dispatch lock
// alone is held across the write, and the outcome is recorded under the
// queue lock again, taken after the dispatch lock is released (the lock
// order is queue, dispatch, mu).
func (c *Controller) dispatchNext(ctx context.Context) bool {
	c.q.mu.Lock()
	c.dispatch.Lock()
	both := true
	defer func() {
		if both {
			c.dispatch.Unlock()
			c.q.mu.Unlock()
		}
	}()
	c.mu.Lock()
	head := c.headLocked()
	if head == nil || head.State != protocol.ReceiptQueued || c.q.unanswered[head.ID] {
		c.mu.Unlock()
		return false
	}
	x, ok := c.readyLocked()
	if !ok {
		c.mu.Unlock()
		return false
	}
	// Rechecked under the dispatch lock right before the write: control
	// and target moved since admission pause the queue (the items stay
	// theirs) rather than send under authority nobody resumed.
	switch {
	case c.st.controller == "":
		c.pauseQueueLocked("nobody holds control; take control and resume the queue")
	case c.st.generation != c.q.gen:
		c.pauseQueueLocked(fmt.Sprintf("control changed (generation %d, the queue was authorised at %d); resume to send under the current controller", c.st.generation, c.q.gen))
	case x.id != c.q.exec:
		c.pauseQueueLocked(fmt.Sprintf("the execution changed (now %s, the queue was authorised for %s); resume to send to the current one", x.id, c.q.exec))
	}
	if c.q.paused {
		c.mu.Unlock()
		return false
	}
	gen := c.st.generation
	_, _, after := c.bus.window()
	c.mu.Unlock()

	text := head.Current().Text
	next := head.Next()
	next.State, next.Reason, next.Evidence, next.Updated = protocol.ReceiptDispatched, "", "", now()
	next.Dispatch = &queue.Dispatch{Execution: x.id, Generation: gen, AfterSeq: after, At: next.Updated}
	// The session file's size now, before the write: a restart counts
	// only user messages after it as this item's (queueload.go).
	if n, err := c.sessionSize(); err == nil {
		next.Dispatch.SessionAt = &n
	}
	if err := engine.CheckText(text); err != nil {
		return c.finishItem(next, protocol.ReceiptDispatchRefused, "refused at dispatch, nothing was written: "+err.Error(), "")
	}
	run(c.test.beforeDispatch)
	if err := c.q.store.Write(next); err != nil {
		c.mu.Lock()
		c.pauseQueueLocked("the queue store refused the dispatch record, nothing was written: " + err.Error())
		c.mu.Unlock()
		return false
	}
	c.mu.Lock()
	c.commitLocked(next, "")
	c.mu.Unlock()
	run(c.test.afterDispatchRecord)

	both = false
	c.q.mu.Unlock()
	d, err := x.conn.Prompt(ctx, text)
	c.dispatch.Unlock()
	c.q.mu.Lock()
	defer c.q.mu.Unlock()
	var native *engine.NativeError
	switch {
	case err == nil:
		return c.finishItem(next, protocol.ReceiptAcknowledged, "", "")
	case errors.Is(err, engine.ErrNativeBusy) && errors.As(err, &native):
		// Not sent (DIGEST §2): the item stays at the head and goes after
		// the next agent_settled.
		c.mu.Lock()
		c.q.hold, c.q.heldAt, c.q.heldExec = true, x.settled, x.id
		c.mu.Unlock()
		return c.requeue(next, "the engine was still processing: "+native.Text)
	case errors.As(err, &native) || d.Receipt == protocol.ReceiptFailed:
		return c.finishItem(next, protocol.ReceiptFailed, "", d.Evidence)
	case d.Receipt == protocol.ReceiptDeliveryUnknown:
		return c.finishItem(next, protocol.ReceiptDeliveryUnknown, err.Error(), "")
	case protocol.CodeOf(err) == protocol.CodeBusy || protocol.CodeOf(err) == protocol.CodeFenced || protocol.CodeOf(err) == protocol.CodeEngineGone:
		// The engine connection refused before writing (or was closed
		// already): nothing reached the engine, so the item is still the
		// head, for the next engine once someone resumes.
		switch {
		case errors.Is(err, engine.ErrStdinBroken):
			// The engine stopped reading its stdin, or a force stop
			// closed it mid-write: no byte of the item reached it (a
			// record cut short is delivery-unknown above).
			c.mu.Lock()
			c.pauseQueueLocked(fmt.Sprintf("item %s was not written to the engine of execution %s (%v); it stays queued, and a force stop keeps it as a draft", next.ID, x.id, err))
			c.mu.Unlock()
		case protocol.CodeOf(err) == protocol.CodeEngineGone:
			c.mu.Lock()
			c.pauseQueueLocked(fmt.Sprintf("the engine was gone before item %s was written; it stays queued: resume once an engine runs", next.ID))
			c.mu.Unlock()
		}
		return c.requeue(next, "not written: "+err.Error())
	default:
		return c.finishItem(next, protocol.ReceiptDispatchRefused, "refused at dispatch, nothing was written: "+err.Error(), "")
	}
}

// finishItem records the item's outcome after its dispatch revision.
func (c *Controller) finishItem(prev queue.Item, state, reason, evidence string) bool {
	next := prev.Next()
	next.State, next.Reason, next.Evidence, next.Updated = state, reason, evidence, now()
	if err := c.q.store.Write(next); err != nil {
		// The outcome is known in memory only: a restart settles the
		// dispatched revision from the session file instead.
		c.mu.Lock()
		c.setItemLocked(next)
		c.pauseQueueLocked(fmt.Sprintf("the queue store refused item %s's outcome (%s): %v", next.ID, state, err))
		c.mu.Unlock()
		return false
	}
	c.mu.Lock()
	c.commitLocked(next, "")
	// The engine took the prompt (busy) or did not (idle): every client
	// reads engineState from the binding.
	c.publishBindingLocked()
	if state == protocol.ReceiptFailed || state == protocol.ReceiptDispatchRefused {
		// Whatever made the engine refuse this one (no API key, a broken
		// extension, a text it will not take) likely refuses the next:
		// stop rather than burn the queue in a burst.
		c.pauseQueueLocked(fmt.Sprintf("item %s was %s; the items after it wait: fix the cause and resume, or cancel them", next.ID, state))
	}
	c.mu.Unlock()
	c.forgetFinished()
	return state == protocol.ReceiptDeliveryUnknown
}

// requeue puts a dispatched item that was not written back at the head.
func (c *Controller) requeue(prev queue.Item, reason string) bool {
	next := prev.Next()
	next.State, next.Reason, next.Dispatch, next.Updated = protocol.ReceiptQueued, reason, nil, now()
	if err := c.q.store.Write(next); err != nil {
		// Linked but not confirmed durable, the queued revision is what a
		// restart finds: take it as current. Not on disk, the item stays
		// dispatched (never resent; a restart settles it). Either way
		// the queue pauses.
		stored, rerr := c.q.store.Read(next.ID, next.Revision)
		c.mu.Lock()
		if rerr == nil {
			c.setItemLocked(stored)
		}
		c.pauseQueueLocked(fmt.Sprintf("the queue store refused to requeue item %s: %v", next.ID, err))
		c.mu.Unlock()
		return false
	}
	c.mu.Lock()
	c.commitLocked(next, " ("+reason+")")
	c.mu.Unlock()
	return false
}
