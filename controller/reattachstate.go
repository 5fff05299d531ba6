package controller

import (
	"fmt"

	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/protocol"
)

// adoptReattached makes x, an engine a previous controller launched, the
// claim's current execution with admission closed until its checks pass,
// and starts reading it: the steps every engine kind's re-attach shares.
func (c *Controller) adoptReattached(claim *claims.Claim, x *execution) {
	c.bus.reset(x.id)
	c.mu.Lock()
	c.st.claim = claim
	c.st.exec = x
	c.st.binding = protocol.BindingLaunching
	c.closeAdmissionLocked("re-attaching to the running engine after a controller restart")
	c.mu.Unlock()
	go c.pump(x)
	go c.watchExit(x)
}

// reattachFailedLocked leaves a re-attached binding uncertain, as a failed
// load check does: the claim is the engine's, and only a force stop
// moves it on. Callers hold mu.
func (c *Controller) reattachFailedLocked(execID string, err error, fields map[string]string) {
	c.st.binding = protocol.BindingUncertain
	c.st.preflight = "re-attach: " + err.Error()
	c.closeAdmissionLocked("re-attach after a controller restart failed: " + err.Error())
	c.markUncertainLocked("re-attach failed: " + err.Error())
	c.audit(audit.Transition, nil, fmt.Sprintf("re-attached to execution %s, but %v; admission stays closed", execID, err), fields)
}

// reattachedLocked opens admission on a re-attached binding whose checks
// passed. Callers hold mu.
func (c *Controller) reattachedLocked(sessionID, leaf string) {
	c.st.sessionID, c.st.leaf = sessionID, leaf
	c.st.binding = protocol.BindingActive
	c.st.admission, c.st.reason = true, ""
}
