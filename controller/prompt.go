package controller

import (
	"context"
	"fmt"
	"unicode/utf8"

	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/queue"
)

// maxPromptChars is the contract's string cap (262144 characters).
const maxPromptChars = protocol.MaxPromptChars

// prompt admits one prompt into the durable queue: it never refuses for a
// running turn. The text is frozen (digest, actor, connection, generation)
// and its first revision is durable before the receipt says queued; the
// scheduler dispatches it in its turn (dispatch.go).
func (c *Controller) prompt(ctx context.Context, k *conn, cmd *protocol.Command) (*outcome, error) {
	if r := c.admit(k, cmd); r != nil {
		return nil, r
	}
	c.q.mu.Lock()
	defer c.q.mu.Unlock()
	c.mu.Lock()
	if r := c.admitLocked(k, cmd); r != nil {
		c.mu.Unlock()
		return nil, r
	}
	n, size := c.waitingLocked()
	switch {
	case c.q.store == nil:
		c.mu.Unlock()
		return nil, protocol.Wrap(protocol.CodeQueueStore, c.q.err, "the prompt queue cannot be opened, so nothing can be admitted durably; the text stays with you")
	case n >= maxQueued || size+len(cmd.Text) > maxQueuedBytes:
		c.mu.Unlock()
		return nil, protocol.Refuse(protocol.CodeQueueFull, "the queue holds %d items (%d bytes of text); at most %d items and %d bytes wait at once: wait for some to run, or cancel one",
			n, size, maxQueued, maxQueuedBytes)
	}
	at := now()
	gen, x := c.st.generation, c.st.exec
	it := queue.Item{ID: newID("qi-"), Seq: c.q.seq + 1, Revision: 1, State: protocol.ReceiptQueued,
		Request: cmd.Request, Receipt: newID("rc-"), Fingerprint: fingerprint(cmd), Actor: Actor, Connection: k.id,
		Generation: gen, Execution: x.id, Admitted: at, Updated: at,
		Payloads: []queue.Payload{queue.NewPayload(1, cmd.Text, Actor, k.id, gen, at)}}
	c.mu.Unlock()
	c.audit(audit.Admission, k, fmt.Sprintf("admitted prompt %s (%d characters) as queue item %s", cmd.Request, utf8.RuneCountInString(cmd.Text), it.ID),
		map[string]string{"REQUEST": cmd.Request, "COMMAND": "prompt", "ITEM": it.ID})
	run(c.test.afterAdmit)
	if err := c.q.store.Write(it); err != nil {
		// A failure after the link (the directory fsync) may have left
		// the revision on disk: remove it, so a restart never finds an
		// item its sender was told is not queued.
		c.q.store.Forget(it.ID)
		return nil, protocol.Wrap(protocol.CodeQueueStore, err, "the prompt could not be queued durably, so it was not admitted; the text stays with you")
	}
	run(c.test.afterQueued)
	c.mu.Lock()
	if n == 0 {
		// The first waiting item authorises dispatch under the control
		// that admitted it; later ones join what is authorised, and a
		// paused queue waits for a resume. A pause holds the items that
		// were waiting when it began: with none left, it has nothing to
		// hold, and the prompt typed after an interrupt runs.
		c.q.gen, c.q.exec = gen, x.id
		c.q.paused, c.q.reason = false, ""
	}
	c.q.seq = it.Seq
	c.q.unanswered[it.ID] = true
	c.commitLocked(it, "")
	c.mu.Unlock()
	out := done(itemReceipt(&it))
	out.then = func() {
		c.mu.Lock()
		c.answeredLocked(k, it.ID)
		c.mu.Unlock()
		c.kickQueue()
	}
	return out, nil
}

// admit runs the admission checks; nil admits.
func (c *Controller) admit(k *conn, cmd *protocol.Command) *protocol.Refusal {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.admitLocked(k, cmd)
}

func (c *Controller) admitLocked(k *conn, cmd *protocol.Command) *protocol.Refusal {
	if r := c.checkControlLocked(k, cmd); r != nil {
		return r
	}
	if r := c.admissionLocked(); r != nil {
		return r
	}
	if cmd.Text == "" || utf8.RuneCountInString(cmd.Text) > maxPromptChars {
		return protocol.Refuse(protocol.CodeDraft, "a prompt needs 1 to %d characters", maxPromptChars)
	}
	if err := engine.CheckText(cmd.Text); err != nil {
		return asRefusal(err)
	}
	return nil
}
