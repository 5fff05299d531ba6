package controller

import (
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/queue"
)

// Queue bounds (controller/doc.go "The prompt queue"): waiting items and
// their text bytes, finished items kept for receipts, and the text a queue
// record carries for drafts.
const (
	maxQueued       = 64
	maxQueuedBytes  = 1 << 20
	maxFinished     = 1024
	finishedTTL     = 24 * time.Hour
	shownFinished   = 32
	maxShownDrafted = 2 << 20
	// maxEdits bounds one item's edits: every revision carries all its
	// payloads, so 17 payloads of the longest prompt (1.5 MiB each once
	// JSON-escaped) stay under queue.MaxRevisionBytes.
	maxEdits = 16
	// maxDrafts bounds the drafts kept (never forgotten by age): four
	// force stops of a full queue.
	maxDrafts = 256
)

// promptQueue is the durable queue in memory. mu serialises transitions,
// each held across its durable write; items and byReq change only with
// both mu and Controller.mu held, so either lock suffices to read them.
// paused, reason, gen, exec and rev are guarded by Controller.mu.
type promptQueue struct {
	mu    sync.Mutex
	store *queue.Store
	err   error // why the store could not be opened: prompts refuse
	items []*queue.Item
	byReq map[string]*queue.Item
	seq   uint64

	paused bool
	reason string
	gen    int64  // the generation dispatch is authorised under
	exec   string // the execution dispatch is authorised to
	rev    uint64
	// hold is set when Pi answered "already processing": dispatch to
	// execution heldExec waits for an agent_settled after heldAt (its
	// settle count then). A hold names its execution: another one's
	// count starts over, so the hold means nothing there.
	hold     bool
	heldAt   int
	heldExec string
	kick     chan struct{}
	// unanswered holds the items whose admission reply is not queued for
	// their connection yet (guarded by mu): dispatching one would offer
	// its dispatched receipt before the queued one that answers the
	// prompt, and a client takes the first receipt naming its request as
	// the reply. A run that settles meanwhile kicks the scheduler too.
	unanswered map[string]bool
	// later holds, for an unanswered item, the receipts of the revisions
	// another connection made meanwhile (guarded by mu): they follow the
	// reply (laterreceipt.go).
	later map[string][]protocol.Receipt
}

func newPromptQueue() *promptQueue {
	return &promptQueue{byReq: map[string]*queue.Item{}, unanswered: map[string]bool{},
		later: map[string][]protocol.Receipt{}, kick: make(chan struct{}, 1)}
}

// queueRoot is where conversations' queues live: beside the claim root.
func (c *Controller) queueRoot() string {
	return filepath.Join(filepath.Dir(c.cfg.Claims.Root()), "queue")
}

// waiting reports whether an item still belongs to the queue.
func waiting(it *queue.Item) bool {
	return it.State == protocol.ReceiptQueued || it.State == protocol.ReceiptDispatched
}

// kickQueue asks the scheduler to look at the head again.
func (c *Controller) kickQueue() {
	select {
	case c.q.kick <- struct{}{}:
	default:
	}
}

// setItemLocked replaces or appends an item's current revision; both
// locks are held. A finished item whose text no record carries keeps only
// its payloads' lineage and digests in memory (its text stays on disk):
// up to 1024 finished items of 17 payloads each must not hold gigabytes.
// Nothing writes a revision from such an item: only queued items and
// drafts change, and both keep their text.
func (c *Controller) setItemLocked(it queue.Item) {
	if !waiting(&it) && !keepsText(&it) {
		it.Payloads = append([]queue.Payload(nil), it.Payloads...)
		for i := range it.Payloads {
			it.Payloads[i].Text = ""
		}
	}
	p := &it
	for i, old := range c.q.items {
		if old.ID == it.ID {
			c.q.items[i] = p
			c.q.byReq[it.Request] = p
			return
		}
	}
	c.q.items = append(c.q.items, p)
	c.q.byReq[it.Request] = p
}

// itemLocked finds an item by id.
func (c *Controller) itemLocked(id string) *queue.Item {
	for _, it := range c.q.items {
		if it.ID == id {
			return it
		}
	}
	return nil
}

// headLocked is the first waiting item, queued or dispatched.
func (c *Controller) headLocked() *queue.Item {
	for _, it := range c.q.items {
		if waiting(it) {
			return it
		}
	}
	return nil
}

// waitingLocked counts the waiting items and their text bytes.
func (c *Controller) waitingLocked() (n, bytes int) {
	for _, it := range c.q.items {
		if waiting(it) {
			n++
			bytes += len(it.Current().Text)
		}
	}
	return n, bytes
}

// queueRecordLocked projects the queue for clients: waiting items with
// their text; every item whose text has no other home (drafts, failed,
// dispatch-refused: keepsText), with its text while the record's text of
// such items stays under maxShownDrafted, newest first; and the newest
// shownFinished of the other finished items, without text.
func (c *Controller) queueRecordLocked() protocol.Queue {
	q := protocol.Queue{Record: protocol.RecordQueue, Revision: c.q.rev, Paused: c.q.paused, PauseReason: c.q.reason, Items: []protocol.QueueItem{}}
	shown := map[string]bool{}
	withText := map[string]bool{}
	others, budget := 0, maxShownDrafted
	for i := len(c.q.items) - 1; i >= 0; i-- {
		it := c.q.items[i]
		switch {
		case waiting(it):
			shown[it.ID], withText[it.ID] = true, true
		case keepsText(it):
			shown[it.ID] = true
			if n := len(it.Current().Text); n <= budget {
				budget -= n
				withText[it.ID] = true
			}
		case others < shownFinished:
			others++
			shown[it.ID] = true
		}
	}
	for _, it := range c.q.items {
		if !shown[it.ID] {
			continue
		}
		qi := itemRecord(it)
		if !withText[it.ID] {
			qi.Text = ""
		}
		q.Items = append(q.Items, qi)
	}
	return q
}

// keepsText says whether a finished item's text stays in the queue record:
// a draft, and an item the engine never took (failed, dispatch-refused),
// whose sender may have gone (--no-wait) and has no other copy.
func keepsText(it *queue.Item) bool {
	switch it.State {
	case protocol.ReceiptDraft, protocol.ReceiptFailed, protocol.ReceiptDispatchRefused:
		return true
	}
	return false
}

func itemRecord(it *queue.Item) protocol.QueueItem {
	cur := it.Current()
	qi := protocol.QueueItem{ID: it.ID, Receipt: it.Receipt, Request: it.Request, Revision: it.Revision, State: it.State,
		Text: cur.Text, Digest: cur.Digest, Original: it.Payloads[0].Digest, Edits: len(it.Payloads) - 1,
		Actor: it.Actor, Connection: it.Connection, Generation: it.Generation, Execution: it.Execution,
		Reason: it.Reason, Evidence: it.Evidence}
	if d := it.Dispatch; d != nil {
		qi.Execution, qi.AfterSeq = d.Execution, d.AfterSeq
	}
	return qi
}

// publishQueueLocked broadcasts the queue after a change: engine peers get
// it without text (queueRecordForLocked).
func (c *Controller) publishQueueLocked() {
	c.q.rev++
	q := c.queueRecordLocked()
	full, err := protocol.Line(q)
	if err != nil {
		return
	}
	var bare []byte
	for _, k := range c.conns {
		switch {
		case !k.hello:
		case k.enginePeer():
			if bare == nil {
				if bare, err = protocol.Line(withoutText(q)); err != nil {
					continue
				}
			}
			k.offer(bare)
		default:
			k.offer(full)
		}
	}
}

// queueRecordForLocked is the queue record offered to k. An engine peer (a
// connection from inside the engine's cohort, the adversary) sees the
// items and their states but no text: prompts not yet sent, drafts and
// refused prompts are the person's to read, not the agent's.
func (c *Controller) queueRecordForLocked(k *conn) protocol.Queue {
	q := c.queueRecordLocked()
	if k.enginePeer() {
		return withoutText(q)
	}
	return q
}

func withoutText(q protocol.Queue) protocol.Queue {
	items := make([]protocol.QueueItem, len(q.Items))
	copy(items, q.Items)
	for i := range items {
		items[i].Text = ""
	}
	q.Items = items
	return q
}

// itemReceipt is an item's receipt: one revision per item revision.
func itemReceipt(it *queue.Item) protocol.Receipt {
	rc := protocol.Receipt{Record: protocol.RecordReceipt, ID: it.Receipt, Request: it.Request, Command: protocol.CmdPrompt,
		State: it.State, Revision: it.Revision, Execution: it.Execution, Generation: it.Generation, Actor: it.Actor,
		Connection: it.Connection, Digest: it.Fingerprint, Item: it.ID, Reason: it.Reason, Evidence: it.Evidence}
	if d := it.Dispatch; d != nil {
		rc.Execution, rc.AfterSeq = d.Execution, d.AfterSeq
	}
	return rc
}

// commitLocked makes it the item's current revision in memory, publishes
// the queue, sends the receipt's new revision to the admitting connection
// when it is still here (after the prompt's reply: offerLaterLocked), and
// journals it. Both locks are held; the
// revision is already durable.
func (c *Controller) commitLocked(it queue.Item, why string) {
	c.setItemLocked(it)
	c.publishQueueLocked()
	if k := c.conns[it.Connection]; k != nil && it.Revision > 1 {
		c.offerLaterLocked(k, &it)
	}
	c.audit(audit.Receipt, nil, fmt.Sprintf("queue item %s (request %s) revision %d: %s%s", it.ID, it.Request, it.Revision, it.State, why),
		map[string]string{"REQUEST": it.Request, "RECEIPT": it.Receipt, "ITEM": it.ID, "STATE": it.State, "REVISION": fmt.Sprint(it.Revision)})
}

// pauseQueueLocked holds dispatch until the controller resumes. A pause
// holds the items waiting when it begins: with none, there is nothing to
// hold, and the next prompt runs.
func (c *Controller) pauseQueueLocked(reason string) {
	if n, _ := c.waitingLocked(); n == 0 || (c.q.paused && c.q.reason == reason) {
		return
	}
	c.q.paused, c.q.reason = true, reason
	c.publishQueueLocked()
	c.audit(audit.Transition, nil, "queue paused: "+reason, map[string]string{"QUEUE": "paused"})
}

// takeQueueLocked hands the queue to a new controller. Its items keep
// their original actor and connection. When they are all the new
// controller's actor's, dispatch goes on under the new generation (a
// person who takes control from another terminal of theirs keeps what
// they queued); an item of another actor pauses the queue until the new
// controller resumes, edits or cancels. This build has one actor, so the
// pause is the rule's other half, written for when there are more.
func (c *Controller) takeQueueLocked(k *conn, how string) {
	for _, it := range c.q.items {
		if waiting(it) && it.Actor != Actor {
			c.pauseQueueLocked(fmt.Sprintf("control changed to connection %s at generation %d (%s) and the queue holds another actor's items; resume to send them",
				k.id, c.st.generation, how))
			return
		}
	}
	if n, _ := c.waitingLocked(); n > 0 && c.q.gen == c.st.generation-1 {
		c.q.gen = c.st.generation
		c.publishQueueLocked()
	}
}

// now is the time stamp revisions carry.
func now() string { return time.Now().UTC().Format(time.RFC3339Nano) }

// forgetFinished applies retention: finished items older than finishedTTL
// or beyond the newest maxFinished are removed from disk and memory, so
// the durable receipt index stays bounded. Drafts are the exception: a
// force stop's recovered text has no other home, so a draft stays until
// it is cancelled (cancel-queued), whatever its age; only drafts beyond
// the newest maxDrafts go. Called with the queue lock.
func (c *Controller) forgetFinished() {
	c.mu.Lock()
	var drop []*queue.Item
	finished, drafts := 0, 0
	for i := len(c.q.items) - 1; i >= 0; i-- {
		it := c.q.items[i]
		if waiting(it) {
			continue
		}
		if it.State == protocol.ReceiptDraft {
			if drafts++; drafts > maxDrafts {
				drop = append(drop, it)
			}
			continue
		}
		finished++
		t, err := time.Parse(time.RFC3339Nano, it.Updated)
		if finished > maxFinished || (err == nil && time.Since(t) > finishedTTL) {
			drop = append(drop, it)
		}
	}
	c.mu.Unlock()
	for _, it := range drop {
		if err := c.q.store.Forget(it.ID); err != nil {
			continue // kept, and tried again at the next retention pass
		}
		c.mu.Lock()
		for i, x := range c.q.items {
			if x == it {
				c.q.items = append(c.q.items[:i], c.q.items[i+1:]...)
				break
			}
		}
		if c.q.byReq[it.Request] == it {
			delete(c.q.byReq, it.Request)
			// The in-memory copy of its first reply says queued: it must
			// not answer a retry the durable index no longer can.
			if e := c.dedup.m[it.Request]; e != nil && !e.pending {
				if e.elem != nil {
					c.dedup.answered.Remove(e.elem)
				}
				delete(c.dedup.m, it.Request)
			}
		}
		c.mu.Unlock()
	}
}

// queueOptions passes the test's fault hook to the store.
func (c *Controller) queueOptions() []queue.Option {
	if c.test.queueFault == nil {
		return nil
	}
	return []queue.Option{queue.WithFault(c.test.queueFault)}
}
