package controller

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"unicode/utf8"

	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/queue"
)

// editQueued replaces a queued item's text by a new frozen payload
// revision, compare-and-set on the item revision the client saw; the
// earlier payloads stay in the item. A dispatch that won the race is
// named in the refusal.
func (c *Controller) editQueued(ctx context.Context, k *conn, cmd *protocol.Command) (*outcome, error) {
	if cmd.Text == "" || utf8.RuneCountInString(cmd.Text) > maxPromptChars {
		return nil, protocol.Refuse(protocol.CodeDraft, "an edit needs 1 to %d characters", maxPromptChars)
	}
	if err := engine.CheckText(cmd.Text); err != nil {
		return nil, err
	}
	return c.changeItem(k, cmd, "", func(it *queue.Item, gen int64, at string) (string, *protocol.Refusal) {
		if edits := len(it.Payloads) - 1; edits >= maxEdits {
			return "", protocol.Refuse(protocol.CodeEditLimit, "item %s has been edited %d times, the most an item keeps: cancel it and send the text as a new prompt", it.ID, edits)
		}
		_, size := c.waitingLocked()
		if size-len(it.Current().Text)+len(cmd.Text) > maxQueuedBytes {
			return "", protocol.Refuse(protocol.CodeQueueFull, "the edit would make the queue's text %d bytes, over %d: shorten it or cancel an item",
				size-len(it.Current().Text)+len(cmd.Text), maxQueuedBytes)
		}
		it.Payloads = append(it.Payloads, queue.NewPayload(len(it.Payloads)+1, cmd.Text, Actor, k.id, gen, at))
		it.Reason = ""
		return "edited", nil
	})
}

// cancelQueued cancels one queued item, compare-and-set like an edit. It
// also cancels a draft: the way a person discards recovered text, which is
// otherwise kept whatever its age.
func (c *Controller) cancelQueued(ctx context.Context, k *conn, cmd *protocol.Command) (*outcome, error) {
	return c.changeItem(k, cmd, protocol.ReceiptDraft, func(it *queue.Item, _ int64, _ string) (string, *protocol.Refusal) {
		it.State, it.Reason = protocol.ReceiptCancelled, "cancelled by connection "+k.id
		return "cancelled", nil
	})
}

// changeItem is the compare-and-set both edit and cancel make, under the
// queue lock, so it and a dispatch are ordered: whichever takes the lock
// first wins, and the other sees the winner's revision. The item must be
// queued, or in state also when that is set (a draft, for cancel).
func (c *Controller) changeItem(k *conn, cmd *protocol.Command, also string, change func(*queue.Item, int64, string) (string, *protocol.Refusal)) (*outcome, error) {
	if cmd.Item == "" || cmd.Revision == nil {
		return nil, protocol.Refuse(protocol.CodeMalformed, "a %s names the item and the revision you saw (item, revision)", cmd.Type)
	}
	c.q.mu.Lock()
	defer c.q.mu.Unlock()
	c.mu.Lock()
	if r := c.checkControlLocked(k, cmd); r != nil {
		c.mu.Unlock()
		return nil, r
	}
	cur := c.itemLocked(cmd.Item)
	switch {
	case cur == nil:
		c.mu.Unlock()
		return nil, protocol.Refuse(protocol.CodeUnknownItem, "the queue has no item %s (finished items are kept %s)", quoted(cmd.Item), finishedTTL)
	case cur.State != protocol.ReceiptQueued && (also == "" || cur.State != also):
		c.mu.Unlock()
		return nil, protocol.Refuse(protocol.CodeItemDispatched, "item %s is %s at revision %d; it left the queue before this %s", cur.ID, cur.State, cur.Revision, cmd.Type)
	case cur.Revision != *cmd.Revision:
		c.mu.Unlock()
		return nil, protocol.Refuse(protocol.CodeStaleItem, "item %s is at revision %d, not %d: read the queue again", cur.ID, cur.Revision, *cmd.Revision)
	}
	next := cur.Next()
	next.Updated = now()
	what, r := change(&next, c.st.generation, next.Updated)
	c.mu.Unlock()
	if r != nil {
		return nil, r
	}
	if err := c.q.store.Write(next); err != nil {
		return nil, c.changeFailed(next, what+" by "+k.id, err)
	}
	c.mu.Lock()
	c.commitLocked(next, " ("+what+" by "+k.id+")")
	rec := c.queueRecordLocked()
	c.mu.Unlock()
	c.kickQueue()
	rec.Request = cmd.Request
	return done(rec), nil
}

// changeFailed reports a failed write of an item's next revision as what
// actually happened: a write refused before the link left the item
// unchanged; one that failed after it (the directory fsync) left the
// revision on disk, where a restart finds it, so the controller takes it
// as current too (and is not wedged on a revision number that exists)
// and says the outcome is not known durable; anything it cannot read
// back is an unknown outcome.
func (c *Controller) changeFailed(next queue.Item, what string, err error) error {
	if errors.Is(err, queue.ErrTooLarge) {
		return protocol.Wrap(protocol.CodeEditLimit, err, "the item would outgrow what the queue store keeps; it is unchanged: cancel it and send the text as a new prompt")
	}
	stored, rerr := c.q.store.Read(next.ID, next.Revision)
	switch {
	case errors.Is(rerr, fs.ErrNotExist):
		return protocol.Wrap(protocol.CodeQueueStore, err, "the queue store refused the change; the item is unchanged")
	case rerr != nil:
		return protocol.Wrap(protocol.CodeQueueStore, err, "the queue store failed part way and the item cannot be read back (%v): the outcome is unknown; read the queue again", rerr)
	}
	c.mu.Lock()
	c.commitLocked(stored, " ("+what+"; stored, durability not confirmed)")
	c.mu.Unlock()
	return protocol.Wrap(protocol.CodeQueueStore, err, "the change reached the queue store but could not be confirmed durable: the outcome is unknown; the queue now shows item %s at revision %d (%s); read it again",
		stored.ID, stored.Revision, stored.State)
}

// resumeQueue lifts a pause and authorises dispatch under the resuming
// controller's generation and the current execution. A queue that is not
// paused is not refused: the resume still authorises dispatch under this
// generation (a takeover or launch the queue has not caught up with would
// otherwise pause it at the next dispatch) and drops a hold from Pi's
// busy answer, so a script may resume whenever it is unsure; the journal
// says the queue was not paused instead of naming an empty pause.
func (c *Controller) resumeQueue(ctx context.Context, k *conn, cmd *protocol.Command) (*outcome, error) {
	c.mu.Lock()
	if r := c.checkControlLocked(k, cmd); r != nil {
		c.mu.Unlock()
		return nil, r
	}
	if c.st.exec == nil {
		c.mu.Unlock()
		return nil, protocol.Refuse(protocol.CodeNoEngine, "no engine runs in this conversation to send the queue to")
	}
	paused, was, held := c.q.paused, c.q.reason, c.q.hold
	c.q.paused, c.q.reason = false, ""
	c.q.gen, c.q.exec = c.st.generation, c.st.exec.id
	// A resume is someone saying "send now": a hold from Pi's busy
	// answer is dropped (if Pi is still busy it says so again).
	c.q.hold = false
	c.publishQueueLocked()
	rec := c.queueRecordLocked()
	gen, exec := c.q.gen, c.q.exec
	c.mu.Unlock()
	msg, field := fmt.Sprintf("queue resumed at generation %d (was paused: %s)", gen, was), "resumed"
	if !paused {
		msg, field = fmt.Sprintf("queue resume at generation %d: the queue was not paused, nothing to resume; dispatch authorised under generation %d, execution %s", gen, gen, exec), "authorised"
		if held {
			msg += "; the wait for Pi's busy answer dropped"
		}
	}
	c.audit(audit.Transition, k, msg, map[string]string{"QUEUE": field})
	c.kickQueue()
	rec.Request, rec.NotPaused = cmd.Request, !paused
	return done(rec), nil
}
