package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/conversations"
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
	go c.watchDecisions(x, conn)
	c.adoptReattached(claim, x)

	r, skipped, err := rs.Resync(ctx, c.commandTimeout())
	restart := &protocol.Restart{At: time.Now().UTC().Format(time.RFC3339Nano), Resume: n, SkippedBytes: skipped, RunInProgress: r.Running}
	var head sessionHead
	if err == nil {
		if head, err = c.claudeHead(ctx, cv); err != nil {
			err = fmt.Errorf("read the transcript: %w", err)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.st.restart = restart
	fields := map[string]string{"EXECUTION": execID, "ENGINE_PID": fmt.Sprint(h.Cohort.PID), "RESUME": fmt.Sprint(n),
		"SKIPPED_BYTES": fmt.Sprint(skipped), "RUN_IN_PROGRESS": fmt.Sprint(r.Running), "PENDING_APPROVALS": fmt.Sprint(len(r.Pending))}
	if err != nil {
		c.reattachFailedLocked(execID, err, fields)
		return nil
	}
	c.reattachedLocked(cv.Claude.Session, head.leaf)
	c.audit(audit.Transition, nil, fmt.Sprintf("controller restarted: re-attached to Claude Code execution %s (engine pid %d, resume %d, %d bytes skipped to a line boundary, turn in progress %v, %d permission requests pending)",
		execID, h.Cohort.PID, n, skipped, r.Running, len(r.Pending)), fields)
	go c.watchClaude(x, head.leaf, false, head.transcript)
	go c.watchIdle(x)
	return nil
}
