package controller

import (
	"errors"
	"fmt"
	"time"
)

// relayNotes decides which of the auth relay's failures are journaled. A
// tool can make the relay fail every tick (a link flipped between two
// targets, its own copy's lock held and dropped), and the audit must not
// take an entry a tick, so:
//   - a failure is journaled when it differs from the last one journaled,
//     at most once a minute; one held back is journaled once the minute
//     is over if it still stands, counting the changes between;
//   - a lock another process holds is Pi's ordinary way: it is journaled
//     only once it has stood past twice the stale age (renewed, so never
//     stale), and then within the same once-a-minute bound.
//
// Alternatives weighed: journal every change (a tool flipping a link
// wrote an entry a second); journal the first failure only (a new cause
// after the first went unsaid for the controller's lifetime).
type relayNotes struct {
	last        string    // the failure last journaled, "" after a success
	journaled   time.Time // when it was
	lockedSince time.Time // zero unless a lock has held the relay back since then
	held        string    // the last failure held back by the bound
	unsaid      int       // changes held back since the last entry
}

// note takes the relay's result at now and returns the message to
// journal, or "".
func (n *relayNotes) note(err error, now time.Time) string {
	locked := errors.Is(err, errAuthLocked)
	if !locked {
		n.lockedSince = time.Time{}
	}
	switch {
	case err == nil:
		n.last = ""
		return ""
	case locked && n.lockedSince.IsZero():
		// Pi holds it: the next tick tries again.
		n.lockedSince = now
		return ""
	case locked && now.Sub(n.lockedSince) <= 2*staleLock:
		return ""
	case err.Error() == n.last:
		return ""
	case !n.journaled.IsZero() && now.Sub(n.journaled) < time.Minute:
		if err.Error() != n.held {
			n.held = err.Error()
			n.unsaid++
		}
		return ""
	}
	msg := "the OAuth relay between the engine's auth.json and the user's failed: " + err.Error()
	if locked {
		msg = "the OAuth relay has waited over a minute for a lock another process keeps renewing: " + err.Error()
	}
	if n.unsaid > 1 {
		msg += fmt.Sprintf(" (after %d other failures in the minute before, not journaled)", n.unsaid-1)
	}
	n.last, n.journaled, n.held, n.unsaid = err.Error(), now, "", 0
	return msg
}
