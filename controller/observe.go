package controller

import (
	"github.com/mosaic-agents/mosaic/history"
	"github.com/mosaic-agents/mosaic/protocol"
)

// observe answers with the binding, the newest history page of the
// default branch read from the session file (read-only), a cursor to page
// back when there are older parts, and the seam; then it replays the
// current execution's events after fromSeq (or after the last settled run)
// and goes live. The replay and the live feed are one cursor into the
// bus's ring, without gap or overlap, and replace the connection's
// previous feed: no event of it follows the observed record. With a cursor it answers only the older
// page.
func (c *Controller) observe(k *conn, cmd *protocol.Command) {
	switch {
	case cmd.Cursor != "" && cmd.FromSeq != nil:
		c.refuse(k, cmd.Request, protocol.Refuse(protocol.CodeMalformed, "an observe names a cursor (an older page) or fromSeq (a resume), not both"))
		return
	case cmd.Cursor != "":
		c.olderPage(k, cmd)
		return
	}
	raw, cursor, err := c.newestPage(k)
	if err != nil {
		c.refuse(k, cmd.Request, asRefusal(err))
		return
	}
	// The old feed ends before the new one starts, and the new epoch makes
	// the writer drop whatever of it is still queued: after the observed
	// record come only the events this observe subscribes to.
	k.unsubscribe(c.bus)
	k.epoch++
	epoch := k.epoch
	c.mu.Lock()
	quiet := true
	if x := c.st.exec; x != nil && x.conn != nil {
		ts := x.conn.Turn()
		quiet = !ts.Running && ts.Slot == nil
	}
	after := c.bus.lastSettled()
	if cmd.FromSeq != nil {
		after = *cmd.FromSeq
	} else if quiet {
		_, _, after = c.bus.window()
	}
	sub, start, complete := c.bus.subscribeFrom(after, k.kick)
	exec, from, until := c.bus.window()
	obs := protocol.Observed{Record: protocol.RecordObserved, Request: cmd.Request, Binding: c.bindingLocked(),
		Seam: protocol.Seam{Execution: exec, Replay: "available", ReplayFrom: from, ReplayUntil: until, ReplayStart: start,
			Quiet: quiet, Reconcile: !complete || !quiet || c.st.reconcile || c.beforeRestartLocked(cmd.FromSeq)}, Cursor: cursor, Approvals: c.liveApprovalsLocked()}
	q := c.queueRecordForLocked(k)
	obs.Queue = &q
	// The page is spliced in as encoded, not validated again (LineWith).
	if line, err := protocol.LineWith(&obs, &obs.History, raw); err == nil {
		k.offerEpoch(line, epoch)
	}
	c.mu.Unlock()
	k.follow(c.bus, sub, epoch)
}

// newestPage is the newest history page of the default branch and a
// cursor for the page before it ("" when there is none). One view per
// connection: cursors of its earlier pages go, and with them the
// snapshots they kept.
func (c *Controller) newestPage(k *conn) ([]byte, string, error) {
	v, err := c.readView()
	if err != nil {
		return nil, "", err
	}
	total, err := v.parts()
	if err != nil {
		return nil, "", err
	}
	raw, first, err := v.pageBefore(total)
	if err != nil {
		return nil, "", err
	}
	c.cursors.drop(k.id)
	cursor := ""
	if first > 0 {
		cursor = c.cursors.issue(k.id, v, first)
	}
	return raw, cursor, nil
}

// readView reads the default branch of the conversation's history for an
// observe: the engine's own record of it, a Pi session or a Claude
// transcript.
func (c *Controller) readView() (pager, error) {
	if c.cfg.Conversation.IsClaude() {
		v, err := c.claudeRead()
		if err != nil {
			return nil, err
		}
		return v, nil
	}
	snap, err := c.readSnapshot()
	if err != nil {
		return nil, err
	}
	return branchView{snap: snap, branch: snap.DefaultBranch()}, nil
}

// olderPage answers an observe with a cursor: the page before the cursor's,
// from the cursor's view, and a cursor for the one before that.
func (c *Controller) olderPage(k *conn, cmd *protocol.Command) {
	pc, r := c.cursors.use(k.id, cmd.Cursor)
	if r != nil {
		c.refuse(k, cmd.Request, r)
		return
	}
	raw, from, err := pc.view.pageBefore(pc.end)
	if err != nil {
		c.refuse(k, cmd.Request, asRefusal(err))
		return
	}
	rec := protocol.PageRecord{Record: protocol.RecordPage, Request: cmd.Request}
	if from > 0 {
		rec.Cursor = c.cursors.issue(k.id, pc.view, from)
	}
	line, err := protocol.LineWith(&rec, &rec.History, raw)
	if err != nil {
		c.refuse(k, cmd.Request, protocol.Wrap(protocol.CodeMalformed, err, "encode the history page record"))
		return
	}
	k.enqueueCtl(line)
}

// branchView is a branch of a Pi session snapshot, as a pager.
type branchView struct {
	snap   *history.Snapshot
	branch string
}

func (b branchView) parts() (int, error) { return b.snap.Count(b.branch) }

// pageBefore returns the JSON of the page ending before part end, and
// the index of its first part.
func (b branchView) pageBefore(end int) ([]byte, int, error) {
	page, err := b.snap.Before(b.branch, end)
	if err != nil {
		return nil, 0, err
	}
	raw, err := protocol.Marshal(page)
	if err != nil {
		return nil, 0, protocol.Wrap(protocol.CodeMalformed, err, "encode the history page")
	}
	return raw, page.From, nil
}

// observeReaders bounds the session reads of observes running at once: a
// read parses the whole file, and observers (engine peers among them) may
// ask as often as they like.
const observeReaders = 4

// readSnapshot reads the session file for an observe and returns the
// snapshot the previous observe kept when the file is byte for byte the
// same (a half line written since, which no digest covers, makes the page
// Incomplete: not the same), so the cursors of every connection share one
// snapshot instead of holding one each. It follows that snapshot (the
// bytes read before compared, only appended lines parsed: about one line
// split of the file against nine for a read), and reads afresh without one or when the
// follow refuses: a file replaced or rewritten is shown as it is now (the
// session watch, on its own chain, is what judges the rewrite).
func (c *Controller) readSnapshot() (*history.Snapshot, error) {
	c.readers <- struct{}{}
	defer func() { <-c.readers }()
	path := c.cfg.Conversation.Session
	c.snapMu.Lock()
	last := c.lastSnap
	c.snapMu.Unlock()
	snap, err := followOrRead(last,
		func(s *history.Snapshot) (*history.Snapshot, error) {
			return history.Follow(path, s, history.Options{})
		},
		func() (*history.Snapshot, error) { return history.Read(path, history.Options{}) })
	if err != nil {
		return nil, err
	}
	c.snapMu.Lock()
	defer c.snapMu.Unlock()
	if last := c.lastSnap; last != nil && last.Digest() == snap.Digest() && last.Size() == snap.Size() && last.Epoch() == snap.Epoch() && last.Incomplete() == snap.Incomplete() {
		return last, nil
	}
	c.lastSnap = snap
	return snap, nil
}

// followOrRead is how an observe reads its source: a follow of what the
// observe before read, when there is one and the follow does not refuse,
// and a fresh read otherwise.
func followOrRead[T comparable](last T, follow func(T) (T, error), read func() (T, error)) (T, error) {
	var none T
	if last != none {
		if t, err := follow(last); err == nil {
			return t, nil
		}
	}
	return read()
}
