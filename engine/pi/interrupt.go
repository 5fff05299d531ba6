package pi

import (
	"context"
	"errors"
	"fmt"

	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/protocol"
)

var errAbortSkipped = errors.New("abort not sent: the native queue state is unknown")

// Interrupt stops the current turn by R3-1 (brief §3): it fences the
// engine (prompts refuse fenced), sends clear_queue, and only then abort,
// because abort runs whatever is still queued. It matches the returned
// texts against the one dispatched item that has not started and returns
// the TurnProof. The caller closes its own admission first.
//
// When clear_queue fails or times out the proof records nativeQueue
// unknown, abort is not sent (it could run the unknown queue), the proof
// is uncertain and the fence stays. Otherwise the fence lifts only when
// the proof is certain.
func (c *Conn) Interrupt(ctx context.Context, stopRef string) (engine.TurnProof, error) {
	proof := engine.NewTurnProof(stopRef, c.opts.Execution)
	c.mu.Lock()
	if c.tr.stopping {
		c.mu.Unlock()
		return proof, protocol.Refuse(protocol.CodeFenced, "an interrupt is already running")
	}
	c.tr.stopping, c.tr.fenced = true, true
	if c.tr.running {
		proof.InterruptedRun = c.tr.runs
	}
	c.mu.Unlock()

	q, qerr := c.ClearQueue(ctx)
	cancelled, aerr := c.abortUnless(ctx, qerr)
	proof.CancelledDialogs = cancelled

	c.mu.Lock()
	defer c.mu.Unlock()
	c.conclude(&proof, q, qerr, aerr)
	c.tr.stopping = false
	if !proof.Uncertain {
		c.tr.fenced = false
	}
	return proof, nil
}

// abortUnless sends abort unless clearing the queue failed. Right after
// the abort is written, and before waiting for its answer, every dialog
// still open is cancelled: pinned Pi's abort waits for a dialog whose
// extension took no signal (DIGEST §1.4), and an answer written after the
// abort no longer runs a gated tool. It returns the cancelled dialogs.
func (c *Conn) abortUnless(ctx context.Context, clearErr error) ([]string, error) {
	if clearErr != nil {
		return nil, errAbortSkipped
	}
	id := c.newID("abort-")
	c.mu.Lock()
	ch, err := c.register(id)
	c.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("abort: %w", err)
	}
	if err := c.send(simple("abort")(id)); err != nil {
		c.abandon(id)
		return nil, fmt.Errorf("abort: %w", err)
	}
	cancelled, _ := c.Cancel()
	n, err := c.await(ctx, id, "abort", ch, c.opts.AbortTimeout)
	if err != nil {
		c.abandon(id)
		return cancelled, err
	}
	if n.Success == nil || !*n.Success {
		return cancelled, &engine.NativeError{Command: "abort", ID: id, Text: n.Error}
	}
	return cancelled, nil
}

// conclude fills the proof from the clear and abort results and the
// tracker, and settles the slot; c.mu is held.
func (c *Conn) conclude(p *engine.TurnProof, q QueueState, qerr, aerr error) {
	s := c.tr.slot
	var item *engine.Dispatch
	if s != nil && !s.Started && s.Receipt != protocol.ReceiptFailed {
		item = s
	}
	if qerr != nil {
		p.NativeQueue = engine.QueueUnknown
		p.Doubt("clear_queue: " + qerr.Error())
		if item != nil {
			item.Receipt = protocol.ReceiptDeliveryUnknown
		}
	} else {
		p.NativeQueue = engine.QueueCleared
		var ambiguous []engine.QueuedText
		p.ItemsMatched, p.External, ambiguous = matchQueue(item, q)
		p.Ambiguous = ambiguous
		switch {
		case len(p.ItemsMatched) == 1:
			// Proven unconsumed: the receipt keeps its actual state
			// (acknowledged) and the item is never resent (R3-1.3).
			item.Unconsumed = true
		case len(ambiguous) > 0:
			item.Receipt = protocol.ReceiptDeliveryUnknown
			p.Doubt("clear_queue returned the item's text ambiguously")
		}
	}
	if aerr != nil {
		p.Doubt("abort: " + aerr.Error())
	} else {
		p.AbortAcknowledged = true
	}
	if s != nil && s.Receipt == engine.ReceiptPending {
		// The prompt's own response never came: nobody can say.
		s.Receipt = protocol.ReceiptDeliveryUnknown
		p.Doubt("prompt response missing at interrupt")
	}
	p.Effects = c.tr.effects()
	if c.tr.uncertain {
		p.Doubt("binding uncertain")
	}
	if s != nil {
		d := *s
		p.Dispatch = &d
		if !p.Uncertain {
			c.tr.release()
		}
	}
}
