package controller

import (
	"context"
	"encoding/hex"
	"fmt"

	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/engine/claude"
	hclaude "github.com/mosaic-agents/mosaic/history/claude"
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
// since up to the first one it holds back (handedMark), and the next
// controller starts its watch from exactly those bytes (reattachHead):
// it checks what follows them, where before it vouched for whatever the
// file held when it looked. The latest announcements of this
// controller's connection go with them (handOver, takeOver): the CLI
// writes a line up to 80 ms after its frame, so the lines of what this
// controller read and sent last land after the restart.
//
// A Pi engine needs none: the re-attach checks the session file against
// the entries Pi holds. A crash writes no handover; what the next
// controller then takes is the mark this one kept in the fd store
// (markkeep.go; docs/recovery.md, "After a crash").
func (c *Controller) Handover() {
	c.mu.Lock()
	x := c.st.exec
	live := x != nil && x.conn != nil && !x.exited && c.cfg.Conversation.IsClaude() && c.st.claim != nil
	c.mu.Unlock()
	if !live {
		return
	}
	c.awaitWatched(x)
	v := x.vouched.Load()
	if v == nil {
		return
	}
	v = handedMark(v, x.heldBack.Load())
	// Last, what the connection announced: a frame read from now until
	// this process exits is the one the next controller cannot prove.
	said := handOver(x.conn)
	fields := map[string]string{"EXECUTION": x.id, "VOUCHED_SIZE": fmt.Sprint(v.Size), "VOUCHED_SHA256": v.SHA256, "ANNOUNCED": fmt.Sprint(len(said))}
	ctx, cancel := context.WithTimeout(context.Background(), c.commandTimeout())
	defer cancel()
	if err := c.claimDo(func(cl *claims.Claim) error { return cl.Handover(ctx, v, said) }); err != nil {
		c.audit(audit.Transition, nil, fmt.Sprintf("restarting: the claim refused the handover of execution %s's transcript (%v); the next controller vouches for the transcript as it reads it", x.id, err), fields)
		return
	}
	c.audit(audit.Transition, nil, fmt.Sprintf("restarting: handed execution %s's transcript to the next controller as vouched for (%d bytes, sha256 %s) with the latest %d announcements of its engine", x.id, v.Size, cutHex(v.SHA256), len(said)), fields)
}

// handOver is what conn announced last, as a claim records it: the CLI
// writes a line up to 80 ms after its frame (measured), so the lines of
// the frames read just before a restart land after it, where only these
// prove them.
func handOver(conn engineConn) []claims.Announcement {
	a, err := driverAs[announcer](conn, "hand over")
	if err != nil {
		return nil
	}
	var out []claims.Announcement
	for _, h := range a.Latest(claims.MaxAnnouncements) {
		out = append(out, claims.Announcement{UUID: h.UUID, Said: hex.EncodeToString(h.Said[:]), Prompt: h.Prompt})
	}
	return out
}

// takeOver seeds conn with what the previous controller handed over
// (handOver); an entry that does not decode is left out (its line then
// waits for a frame, fail closed).
func takeOver(conn engineConn, said []claims.Announcement) int {
	a, err := driverAs[announcer](conn, "take over")
	if err != nil {
		return 0
	}
	var hs []claude.Handed
	for _, s := range said {
		if d, ok := parseSaid(s.Said); ok && s.UUID != "" {
			hs = append(hs, claude.Handed{UUID: s.UUID, Said: d, Prompt: s.Prompt})
		}
	}
	a.Seed(hs)
	return len(hs)
}

// parseSaid reads what a line says as a handover or a mark records it
// (hclaude.Said, lowercase hex); ok is false for anything else.
func parseSaid(s string) (d hclaude.Said, ok bool) {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(d) {
		return d, false
	}
	copy(d[:], b)
	return d, true
}

// handedMark is what a restart hands over of the transcript: the last
// read the watch vouched for whole, or more, the lines it proved after
// that read up to the first it holds back (hb): the next controller
// could prove none of them again from the announcements alone (a task
// notification's line is proven by a count of frames, which is not
// handed over; an announcement past the latest MaxAnnouncements is not
// either).
func handedMark(vouched *claims.FileState, hb *heldBack) *claims.FileState {
	if hb != nil && hb.line > 0 {
		if size, digest, ok := hb.t.Before(hb.line); ok && size > vouched.Size {
			return &claims.FileState{Size: size, SHA256: digest}
		}
	}
	return vouched
}
