package controller

import (
	"fmt"

	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/queue"
)

// loadQueue opens the conversation's queue and settles what a previous
// controller left: queued items stay queued (the queue starts paused, so
// nothing is sent before someone in control resumes it); a dispatched
// item is settled from the session file as delivered or delivery-unknown
// and never written again; a damaged item is recovery-failed. A store
// that cannot be opened leaves prompts refused queue-store.
func (c *Controller) loadQueue() {
	st, err := queue.Open(c.queueRoot(), c.cfg.Conversation.ID, c.queueOptions()...)
	if err != nil {
		c.q.err = err
		c.audit(audit.Transition, nil, "the prompt queue cannot be opened: "+err.Error(), map[string]string{"QUEUE": "unavailable"})
		return
	}
	items, damaged, err := st.Load()
	if err != nil {
		c.q.err = err
		c.audit(audit.Transition, nil, "the prompt queue cannot be read: "+err.Error(), map[string]string{"QUEUE": "unavailable"})
		return
	}
	c.q.store = st
	texts, textErr := queue.UserTexts(c.cfg.Conversation.Session)
	sent := map[string]int{} // dispatched items per text, settled or not
	for _, it := range items {
		if it.Dispatch != nil || it.State == protocol.ReceiptDelivered || it.State == protocol.ReceiptAcknowledged {
			sent[it.Current().Digest]++
		}
	}
	waitingLeft := 0
	for _, it := range items {
		if it.Seq > c.q.seq {
			c.q.seq = it.Seq
		}
		if it.State == protocol.ReceiptQueued {
			waitingLeft++
		}
		if it.State == protocol.ReceiptDispatched || it.State == protocol.ReceiptAcknowledged {
			it = c.settleDelivery(st, it, texts, textErr, sent)
		}
		c.setItemLocked(it)
	}
	for _, d := range damaged {
		c.markDamaged(st, d)
	}
	if waitingLeft > 0 {
		c.q.paused, c.q.reason = true, fmt.Sprintf("the controller restarted with %d queued items; resume to send them", waitingLeft)
	}
	c.audit(audit.Transition, nil, fmt.Sprintf("prompt queue loaded: %d items (%d queued), %d damaged", len(items), waitingLeft, len(damaged)),
		map[string]string{"QUEUE": "loaded"})
	c.forgetFinished()
}

// settleDelivery decides a dispatched item's delivery from native evidence
// only: the session file holds its text more often than the other items
// sent with the same text explain. Acknowledged items that the file holds
// become delivered too; the rest stay as they are when acknowledged, and
// become delivery-unknown when only dispatched.
func (c *Controller) settleDelivery(st *queue.Store, it queue.Item, texts map[string]int, textErr error, sent map[string]int) queue.Item {
	cur := it.Current()
	next := it.Next()
	next.Updated = now()
	switch {
	case textErr == nil && texts[cur.Text] >= sent[cur.Digest]:
		next.State, next.Reason = protocol.ReceiptDelivered, "the session file holds its text"
	case it.State == protocol.ReceiptAcknowledged:
		return it
	case textErr != nil:
		next.State, next.Reason = protocol.ReceiptDeliveryUnknown, "dispatched before the controller restarted; the session file could not be read: "+textErr.Error()
	default:
		next.State, next.Reason = protocol.ReceiptDeliveryUnknown, "dispatched before the controller restarted; the session file does not show it was delivered (never resent)"
	}
	if err := st.Write(next); err != nil {
		// Still never resent: in memory it is settled, and the next
		// restart settles the dispatched revision again.
		c.audit(audit.Transition, nil, fmt.Sprintf("queue item %s settled %s, not recorded: %v", it.ID, next.State, err), map[string]string{"ITEM": it.ID})
	}
	return next
}

// markDamaged records a damaged item as recovery-failed when its lineage
// is readable; its text is never used.
func (c *Controller) markDamaged(st *queue.Store, d queue.Damaged) {
	c.audit(audit.Transition, nil, fmt.Sprintf("queue item %s is damaged: %s", d.ID, d.Reason), map[string]string{"ITEM": d.ID, "STATE": protocol.ReceiptRecoveryFailed})
	if d.Last == nil {
		return
	}
	it := *d.Last
	it.State, it.Reason, it.Updated = protocol.ReceiptRecoveryFailed, "stored content is damaged: "+d.Reason, now()
	it.Payloads = []queue.Payload{{Revision: it.Current().Revision, Digest: it.Current().Digest}}
	c.setItemLocked(it)
}

// recoverDrafts turns every queued item into a recovered draft for a
// force stop: never resent, listed in the stop record; an item whose
// draft revision cannot be written is a failure, listed apart.
func (c *Controller) recoverDrafts(s *protocol.Stop) {
	c.q.mu.Lock()
	defer c.q.mu.Unlock()
	var drafts, failures []string
	defer func() {
		c.mu.Lock()
		s.QueueDrafts, s.QueueFailures = drafts, failures
		c.mu.Unlock()
	}()
	c.mu.Lock()
	var todo []queue.Item
	for _, it := range c.q.items {
		switch {
		case it.State == protocol.ReceiptQueued:
			todo = append(todo, *it)
		case it.State == protocol.ReceiptRecoveryFailed && !contains(s.QueueFailures, it.ID):
			failures = append(failures, it.ID)
		}
	}
	c.mu.Unlock()
	for _, it := range todo {
		next := it.Next()
		next.State, next.Reason, next.Updated = protocol.ReceiptDraft, "recovered by force stop "+s.ID+"; never resent automatically", now()
		if c.q.store == nil {
			failures = append(failures, it.ID)
			continue
		}
		if err := c.q.store.Write(next); err != nil {
			next.State, next.Reason = protocol.ReceiptRecoveryFailed, "force stop "+s.ID+" could not record the draft: "+err.Error()
			failures = append(failures, it.ID)
			c.mu.Lock()
			c.setItemLocked(next)
			c.publishQueueLocked()
			c.mu.Unlock()
			continue
		}
		drafts = append(drafts, it.ID)
		c.mu.Lock()
		c.commitLocked(next, "")
		c.mu.Unlock()
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
