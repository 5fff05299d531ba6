package controller

import (
	"fmt"
	"sort"

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
	proven, proofErr := c.provenDeliveries(items)
	waitingLeft := 0
	for _, it := range items {
		if it.Seq > c.q.seq {
			c.q.seq = it.Seq
		}
		if it.State == protocol.ReceiptQueued {
			waitingLeft++
		}
		if it.State == protocol.ReceiptDispatched || it.State == protocol.ReceiptAcknowledged {
			it = c.settleDelivery(st, it, proven[it.ID], proofErr)
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

// provenDeliveries names the dispatched and acknowledged items the session
// file proves delivered. An item is proven only by a user message whose
// line starts after the position its dispatch recorded before the engine
// write, with its text; items are matched in dispatch order, each message
// at most once. So a message older than the item (an earlier identical
// "continue") or already matched to an earlier item proves nothing, and
// an item with no recorded position is never proven. The file is read
// only when some item needs it, from the earliest position.
func (c *Controller) provenDeliveries(items []queue.Item) (map[string]bool, error) {
	var todo []queue.Item
	from := int64(-1)
	for _, it := range items {
		if it.State != protocol.ReceiptDispatched && it.State != protocol.ReceiptAcknowledged {
			continue
		}
		if it.Dispatch == nil || it.Dispatch.SessionAt == nil {
			continue
		}
		todo = append(todo, it)
		if at := *it.Dispatch.SessionAt; from < 0 || at < from {
			from = at
		}
	}
	proven := map[string]bool{}
	if len(todo) == 0 {
		return proven, nil
	}
	entries, err := c.userEntriesFrom(from)
	if err != nil {
		return proven, err
	}
	sort.SliceStable(todo, func(i, j int) bool {
		a, b := *todo[i].Dispatch.SessionAt, *todo[j].Dispatch.SessionAt
		if a != b {
			return a < b
		}
		return todo[i].Seq < todo[j].Seq
	})
	used := make([]bool, len(entries))
	for _, it := range todo {
		at, digest := *it.Dispatch.SessionAt, it.Current().Digest
		for i, e := range entries {
			if !used[i] && e.Offset >= at && e.Digest == digest {
				used[i], proven[it.ID] = true, true
				break
			}
		}
	}
	return proven, nil
}

// settleDelivery decides a dispatched item's delivery from native evidence
// only (provenDeliveries). Acknowledged items the file proves become
// delivered too; the rest stay as they are when acknowledged, and become
// delivery-unknown when only dispatched.
func (c *Controller) settleDelivery(st *queue.Store, it queue.Item, proven bool, proofErr error) queue.Item {
	next := it.Next()
	next.Updated = now()
	switch {
	case proven:
		next.State, next.Reason = protocol.ReceiptDelivered, "the session file holds its text after its dispatch position"
	case it.State == protocol.ReceiptAcknowledged:
		return it
	case proofErr != nil:
		next.State, next.Reason = protocol.ReceiptDeliveryUnknown, "dispatched before the controller restarted; the session file could not be read: "+proofErr.Error()
	case it.Dispatch == nil || it.Dispatch.SessionAt == nil:
		next.State, next.Reason = protocol.ReceiptDeliveryUnknown, "dispatched before the controller restarted, with no recorded session position to prove it by (never resent)"
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
