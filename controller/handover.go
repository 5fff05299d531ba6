package controller

import (
	"context"
	"fmt"

	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/claims"
)

// Handover: the controller exits and its engine stays (a restart of the
// controller's service; the engine's descriptors wait in the fd store,
// resume.go). A Claude transcript's watch vouches for a line only once
// the CLI's stdout announced it (claudecheck.go), and what it read of
// stdout goes with this process: the next controller cannot prove again
// what this one left unproven (an attachment no announced line continues
// yet, a tool's forgery). So the claim's active revision records the
// bytes this controller vouched for last (claims.Claim.Handover), after
// the watch has checked the file as it is now, with the lines proven
// since up to the first one it holds back, and the next controller
// starts its watch from exactly those bytes (reattachHead): it checks
// what follows them, where before it vouched for whatever the file held
// when it looked.
//
// A Pi engine needs none: the re-attach checks the session file against
// the entries Pi holds. A crash hands over nothing; the next controller
// then vouches for the transcript as it reads it, as before
// (docs/recovery.md, "Controller restarts").
func (c *Controller) Handover() {
	c.mu.Lock()
	x := c.st.exec
	claude := x != nil && x.conn != nil && !x.exited && c.cfg.Conversation.IsClaude() && c.st.claim != nil
	c.mu.Unlock()
	if !claude {
		return
	}
	c.awaitWatched(x)
	v := x.vouched.Load()
	if v == nil {
		return
	}
	// Lines proven after the last whole vouch, before the first line
	// held back: the next controller could not prove them again (a
	// prompt this one sent, a frame this one read).
	if hb := x.heldBack.Load(); hb != nil && hb.line > 0 {
		if size, digest, ok := hb.t.Before(hb.line); ok && size > v.Size {
			v = &claims.FileState{Size: size, SHA256: digest}
		}
	}
	fields := map[string]string{"EXECUTION": x.id, "VOUCHED_SIZE": fmt.Sprint(v.Size), "VOUCHED_SHA256": v.SHA256}
	ctx, cancel := context.WithTimeout(context.Background(), c.commandTimeout())
	defer cancel()
	if err := c.claimDo(func(cl *claims.Claim) error { return cl.Handover(ctx, v) }); err != nil {
		c.audit(audit.Transition, nil, fmt.Sprintf("restarting: the claim refused the handover of execution %s's transcript (%v); the next controller vouches for the transcript as it reads it", x.id, err), fields)
		return
	}
	c.audit(audit.Transition, nil, fmt.Sprintf("restarting: handed execution %s's transcript to the next controller as vouched for (%d bytes, sha256 %s)", x.id, v.Size, cutHex(v.SHA256)), fields)
}
