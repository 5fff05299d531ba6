package claude

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/protocol"
)

// Interrupt stops the current turn with the interrupt control request
// (cancel_queued set, so nothing queued natively runs afterwards; the
// controller never queues natively, so anything listed is external or
// the slot's item), behind a fence: prompts refuse fenced for the whole
// interrupt. The proof is built from the receipt (still_queued,
// cancelled) and, when a turn was running, from that turn's result
// (terminal_reason, e.g. aborted_streaming or aborted_tools). A pending
// permission request the CLI did not withdraw (control_cancel_request)
// leaves the proof uncertain. An uncertain proof keeps the slot and the
// fence: force stop is the way out.
func (c *Conn) Interrupt(ctx context.Context, stopRef string) (engine.TurnProof, error) {
	proof := engine.NewTurnProof(stopRef, c.opts.Execution)
	c.mu.Lock()
	if c.tr.stopping {
		c.mu.Unlock()
		return proof, protocol.Refuse(protocol.CodeFenced, "an interrupt is already running")
	}
	c.tr.stopping, c.tr.fenced = true, true
	running := c.tr.running
	if running {
		proof.InterruptedRun = c.tr.runs
	}
	results, settle := c.tr.results, c.tr.settle
	// The item held now: the CLI reports a cancelled queued prompt's
	// lifecycle before the receipt, which releases the slot meanwhile.
	held := c.tr.slot
	c.mu.Unlock()

	resp, err := c.control(ctx, map[string]any{"subtype": "interrupt", "cancel_queued": true}, c.opts.CommandTimeout)
	var rec interruptReceipt
	if err == nil {
		_ = json.Unmarshal(resp.Response, &rec)
	}
	settled := !running || c.awaitResult(ctx, results, settle)

	c.mu.Lock()
	defer c.mu.Unlock()
	c.conclude(&proof, held, rec, err, running, settled)
	c.tr.stopping = false
	if !proof.Uncertain {
		c.tr.fenced = false
	}
	return proof, nil
}

// awaitResult waits up to AbortTimeout for a result after the given
// count.
func (c *Conn) awaitResult(ctx context.Context, after int, settle chan struct{}) bool {
	t := time.NewTimer(c.opts.AbortTimeout)
	defer t.Stop()
	for {
		select {
		case <-settle:
		case <-t.C:
			return false
		case <-ctx.Done():
			return false
		}
		c.mu.Lock()
		n, closed, next := c.tr.results, c.tr.closed, c.tr.settle
		c.mu.Unlock()
		if n > after {
			return true
		}
		if closed {
			return false
		}
		settle = next
	}
}

// conclude fills the proof; c.mu is held.
func (c *Conn) conclude(p *engine.TurnProof, s *engine.Dispatch, rec interruptReceipt, err error, running, settled bool) {
	if err != nil {
		p.NativeQueue = engine.QueueUnknown
		p.Doubt("interrupt: " + err.Error())
		if s != nil && !s.Started {
			s.Receipt = protocol.ReceiptDeliveryUnknown
		}
	} else {
		p.AbortAcknowledged = true
		p.NativeQueue = engine.QueueCleared
		for _, id := range rec.Cancelled {
			if s != nil && id == s.RequestID && !s.Started {
				p.ItemsMatched = append(p.ItemsMatched, engine.QueuedText{Queue: "cancelled", Text: s.Text})
				s.Unconsumed = true
				continue
			}
			p.External = append(p.External, engine.QueuedText{Queue: "cancelled", Text: id})
		}
		for _, id := range rec.StillQueued {
			p.External = append(p.External, engine.QueuedText{Queue: "still_queued", Text: id})
			if s != nil && id == s.RequestID {
				p.Doubt("the item is still queued natively")
			}
		}
		if len(rec.StillQueued) > 0 {
			p.NativeQueue = engine.QueueUnknown
			p.Doubt("still_queued is not empty")
		}
	}
	if running {
		if settled {
			p.TerminalReason = c.tr.lastTerm
		} else {
			p.Doubt("no result after the interrupt")
		}
	}
	for _, d := range c.dec {
		if d.State == engine.DecisionPending {
			p.Doubt("permission request " + d.ID + " still pending")
		}
	}
	if s != nil && s.Receipt == engine.ReceiptPending {
		s.Receipt = protocol.ReceiptDeliveryUnknown
		p.Doubt("prompt receipt missing at interrupt")
	}
	p.Effects = c.tr.effects()
	if c.tr.uncertain {
		p.Doubt("binding uncertain")
	}
	if s != nil {
		d := *s
		p.Dispatch = &d
		if c.tr.slot == s && !p.Uncertain && (s.Unconsumed || slices.Contains(rec.Cancelled, s.RequestID) || settled) {
			c.tr.release()
		}
	} else if c.tr.last != nil && running {
		d := *c.tr.last
		p.Dispatch = &d
	}
}
