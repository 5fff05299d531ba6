package controller

import (
	"fmt"

	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/scopes"
)

// wayOutLocked says what the user can run to leave the current state,
// for the refusals of recover and force stop (docs/recovery.md lists every
// cause of uncertain with its way out). Callers hold mu.
func (c *Controller) wayOutLocked() string {
	id := c.cfg.Conversation.ID
	stop := "`mosaicctl stop --take --yes " + id + "`"
	recover := "`mosaicctl recover --take " + id + "`"
	x := c.st.exec
	switch {
	case c.st.pending != nil:
		return fmt.Sprintf("the cohort is proven gone (proof %s) but the claim store refused to record it (%v): free space in the claim store or make it writable; "+
			"the controller writes it again by itself, or run %s to write it now; then %s", c.st.pending.proof.Digest, c.st.pending.err, stop, recover)
	case c.st.binding == protocol.BindingStopped:
		return "run " + recover
	case c.st.binding == protocol.BindingStopping:
		return "a stop is under way: wait for its outcome (`mosaicctl status " + id + "`)"
	case c.st.binding == protocol.BindingUncertain && c.unreleasedLocked():
		r := c.st.claim.Record()
		unit, _ := scopes.UnitName(r.Conversation, r.Execution)
		return fmt.Sprintf("the launch of execution %s never released its engine (no incarnation recorded), but it could not be withdrawn (%s): "+
			"run %s: it kills what the scope %s holds (only mosaic's held child and anchor) once no launch is under way, and withdraws the launch once the scope is seen gone; "+
			"then %s; see docs/recovery.md", r.Execution, c.st.reason, stop, unit, recover)
	case c.st.binding == protocol.BindingUncertain && (x == nil || x.handle == nil):
		return fmt.Sprintf("this controller knows no engine cohort to stop (%s); restart it with `systemctl --user restart mosaic-conv@%s.service`: "+
			"the restart classifies the claim and observes the cohort it records; see docs/recovery.md", c.st.reason, id)
	case c.st.binding == protocol.BindingUncertain:
		return "run " + stop + ": it proves the cohort ended (also when its scope was already stopped or removed from outside), then " + recover + "; see docs/recovery.md"
	case x != nil:
		return "stop the engine first with " + stop + ", then " + recover
	}
	return "see `mosaicctl status " + id + "` and docs/recovery.md"
}
