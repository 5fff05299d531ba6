package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/conversations"
	hclaude "github.com/mosaic-agents/mosaic/history/claude"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/scopes"
)

// reattachClaude is reattach for a Claude Code engine: its kept pipes
// are read again from the first line boundary (claude.Conn.Resync, two
// initialize requests), the turn in progress and the permission requests
// the CLI still waits on come from the second initialize's answer (the
// only shape the CLI was seen to give after a reconnect), and admission
// opens once the transcript the binding names still reads cleanly. A
// failure leaves the binding uncertain: the claim is the engine's, and
// only a force stop moves it on.
//
// What it cannot check: the CLI does not say which session it holds until
// its next turn; a frame naming another session then marks the binding
// uncertain (claude.Conn), and the next recover's --resume checks the leaf.
func (c *Controller) reattachClaude(ctx context.Context, claim *claims.Claim, h *scopes.Handle, n uint64, cv *conversations.Conversation) error {
	execID := claim.Record().Execution
	x := c.resumedExecution(claim, h, cv)
	// What the previous controller handed over: at a restart in the
	// claim (Handover), at a crash only in its mark (markkeep.go). A
	// mark's announcements are taken even after a handover: they may
	// hold a frame read after the claim was written.
	handed, said := claim.Handed(), claim.HandedAnnounced()
	source := "its predecessor's handover"
	mark := c.markFor(execID)
	if mark != nil {
		v, more := mark.handed()
		if handed == nil {
			handed, source = v, "the mark its predecessor kept (it ended without a handover)"
			if mark.err != nil {
				source = fmt.Sprintf("the mark its predecessor kept, which does not read (%v), so none", mark.err)
			}
		}
		said = append(said, more...)
	}
	if handed != nil {
		// What a stop records if the watch never starts (the re-attach
		// fails): the bytes the predecessor vouched for, which the wake
		// and a recover then hold the transcript to.
		x.vouched.Store(handed)
	}
	conn, err := c.openEngine(cv, h, c.reattachOptions(execID, n))
	if err != nil {
		c.unopened(claim, x, err)
		return nil
	}
	rs, err := driverAs[claudeResyncer](conn, "re-attach")
	if err != nil {
		conn.Close()
		c.unopened(claim, x, err)
		return nil
	}
	x.conn = conn
	// Before any line is checked: the lines of the frames the previous
	// controller read, and of the prompts it sent, may land now.
	seeded := takeOver(conn, said)
	takeNotices(conn, mark.notices())
	f, seq := mark.take()
	c.keepMark(x, f, seq)
	go c.watchDecisions(x, conn)
	c.adoptReattached(claim, x)

	r, skipped, err := rs.Resync(ctx, c.commandTimeout())
	restart := &protocol.Restart{At: time.Now().UTC().Format(time.RFC3339Nano), Resume: n, SkippedBytes: skipped, RunInProgress: r.Running}
	var head sessionHead
	if err == nil {
		if head, err = c.reattachHead(ctx, cv, handed); err != nil {
			err = fmt.Errorf("read the transcript: %w", err)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.st.restart = restart
	fields := map[string]string{"EXECUTION": execID, "ENGINE_PID": fmt.Sprint(h.Cohort.PID), "RESUME": fmt.Sprint(n),
		"SKIPPED_BYTES": fmt.Sprint(skipped), "RUN_IN_PROGRESS": fmt.Sprint(r.Running), "PENDING_APPROVALS": fmt.Sprint(len(r.Pending))}
	from := "the transcript as it read it (nothing handed over)"
	if handed != nil {
		from = fmt.Sprintf("the %d bytes of %s, with %d of its announcements", handed.Size, source, seeded)
		fields["HANDED_SIZE"], fields["HANDED_SHA256"], fields["HANDED_ANNOUNCED"] = fmt.Sprint(handed.Size), handed.SHA256, fmt.Sprint(seeded)
	}
	if err != nil {
		c.reattachFailedLocked(execID, err, fields)
		return nil
	}
	c.reattachedLocked(cv.Claude.Session, head.leaf)
	c.audit(audit.Transition, nil, fmt.Sprintf("controller restarted: re-attached to Claude Code execution %s (engine pid %d, resume %d, %d bytes skipped to a line boundary, turn in progress %v, %d permission requests pending); the watch vouches for %s",
		execID, h.Cohort.PID, n, skipped, r.Running, len(r.Pending), from), fields)
	go c.watchClaude(x, head.leaf, false, head.transcript)
	go c.watchIdle(x)
	return nil
}

// reattachHead is the transcript a re-attached watch starts from: the
// bytes the previous controller handed over (Handover), or kept in its
// mark when it crashed (markkeep.go), read as it read them, so that the
// lines after them are checked as the watch checks every line, and a
// line it left unproven stays so. Without either (an older mosaic, a
// mark the store refused) it is the transcript as it reads now, all of
// it vouched for: nothing else is known of it. A transcript that no longer begins with the bytes handed
// over was changed by another writer in between: the re-attach fails,
// and the binding is uncertain.
func (c *Controller) reattachHead(ctx context.Context, cv *conversations.Conversation, handed *claims.FileState) (sessionHead, error) {
	if handed == nil {
		return c.claudeHead(ctx, cv)
	}
	t, err := hclaude.ReadPrefix(c.claudeRef(cv), handed.Size, handed.SHA256)
	if err != nil {
		return sessionHead{}, fmt.Errorf("the %d bytes the previous controller vouched for (sha256 %s): %w", handed.Size, cutHex(handed.SHA256), err)
	}
	return transcriptHead(cv, t), nil
}
