package controller

import (
	"fmt"
	"time"

	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/scopes"
)

// Shutdown: the controller goes away for good.
//
// Under systemd the engine's descriptors wait in the fd store across a
// restart of the controller's service, and the next controller goes on
// with the same engine (resume.go). A stop of the service for good
// (`systemctl --user stop`, the stop of its socket, which the service
// requires, the user manager's own end at logout) closes them instead, and
// so does a controller run without systemd as it exits. The engine would
// then read EOF and end without a proof: its pid namespace, and with it
// its tools, killed without their grace, the scope held by its anchor for
// as long as the manager runs, the claim left active, and the next
// controller facing an orphan to force stop and recover.
//
// So serve asks Shutdown to end the engine before it exits, whenever the
// manager is not restarting the service (units.ServiceEnding), the way the
// controller's own stops do:
//   - idle but for its clients, who are being let go anyway (quietLocked,
//     no tool process, the session vouched for): a hibernate, which the
//     next client wakes without a confirmation;
//   - otherwise a force stop, with the TERM phase's grace and a cohort
//     proof; queued prompts become drafts and the conversation needs
//     recover, as after any force stop.
//
// No client confirms that force stop: the operator's stop of the service
// is the decision, and the engine would end without it anyway, only
// unproven. Either ends stopped with a proof or uncertain, journaled as
// every stop is. The service's TimeoutStopSec bounds it; a controller
// killed before the end leaves the claim stopping, and the next one
// resumes the stop (K10).

// Shutdown ends the engine of the current execution before the controller
// exits for good, why saying what ends it ("the service is stopping"). It
// does nothing when no engine cohort of this controller's is left to stop
// (none, already stopped, a force stop under way, which Close waits for,
// or a launch not released: the next controller withdraws it), and for
// an orphan: a cohort this controller adopted (W6) without its stdin,
// which the service's end does not end either, and which only a
// confirmed force stop moves on (the brief, §2 "Same boot, engine
// alive").
func (c *Controller) Shutdown(why string) {
	c.mu.Lock()
	x := c.st.exec
	live := c.endableLocked(x)
	orphan := live && x.conn == nil && x.handle.Stdin == nil
	c.mu.Unlock()
	if orphan {
		c.audit(audit.Transition, nil, fmt.Sprintf("%s: execution %s is an orphan this controller holds no stdin of; left to a confirmed force stop", why, x.id),
			map[string]string{"EXECUTION": x.id})
	}
	if !live || orphan {
		return
	}
	c.awaitChecked(x)
	busy := c.idleNow(x, c.quietLocked)
	how := "a hibernate"
	if busy != "" {
		how = "a force stop: not idle (" + busy + ")"
	}
	c.audit(audit.Transition, nil, fmt.Sprintf("%s: ending execution %s with a proof before the controller exits, by %s", why, x.id, how),
		map[string]string{"EXECUTION": x.id})
	if busy == "" && c.hibernate(x, "idle as "+why, c.quietLocked) {
		return
	}
	c.mu.Lock()
	if !c.endableLocked(x) {
		c.mu.Unlock()
		return
	}
	s := c.fenceForceLocked(x, why)
	c.mu.Unlock()
	c.stopping.add(1)
	defer c.stopping.add(-1)
	c.endCohort(nil, x, s)
}

// endableLocked says x is the current execution and its cohort is this
// controller's to end now: launched and released, not stopped, no force
// stop under way, no proof held. Callers hold mu.
func (c *Controller) endableLocked(x *execution) bool {
	return x != nil && c.st.exec == x && x.handle != nil && !c.unreleasedLocked() && !c.st.forceRunning &&
		c.st.binding != protocol.BindingStopped && c.st.pending == nil
}

// awaitChecked gives the session watch up to two of its polls to check
// what the session file holds: a stop right after a turn would otherwise
// find the turn's last entries not vouched for yet and force stop an idle
// conversation, which then needs recover instead of waking.
func (c *Controller) awaitChecked(x *execution) {
	c.mu.Lock()
	busy := c.quietLocked(x)
	c.mu.Unlock()
	if busy == "" {
		c.awaitWatched(x)
	}
}

// awaitWatched gives the session watch up to two of its polls to have
// checked the whole session file as it is now.
func (c *Controller) awaitWatched(x *execution) {
	select {
	case c.pollNow <- struct{}{}: // Pi's watch polls at once
	default:
	}
	for end := time.Now().Add(2 * c.cfg.PollInterval); time.Now().Before(end); time.Sleep(checkedPoll) {
		if n, err := c.sessionSize(); err != nil || n <= x.checked.Load() {
			return
		}
	}
}

// checkedPoll is how often awaitChecked looks at the watch's progress.
const checkedPoll = 20 * time.Millisecond

// ShutdownBound is how long Shutdown may take at most: the session
// watch's two polls (awaitChecked), the hibernate's wait for the engine's
// EOF and the TERM phase's grace (each Grace), and the kill phase's own
// bound. serve asks the service manager for that much (EXTEND_TIMEOUT_USEC)
// before it calls Shutdown, since TimeoutStopSec (10 s) is shorter than
// an engine that ignores both its EOF and SIGTERM can make it.
func (c *Controller) ShutdownBound() time.Duration {
	return 2*c.cfg.PollInterval + 2*c.cfg.Grace + scopes.DefaultKillTimeout
}
