package controller

import (
	"errors"
	"fmt"

	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/protocol"
)

// stdinBroken is the engine connection reporting that a write to the
// engine's stdin missed its deadline or was cut short (engine.Stdin): the
// engine stopped reading, and nothing more is ever written to it, so no
// prompt, approval answer or interrupt can reach it. The binding becomes
// uncertain with admission closed saying why, as for lost output
// (engineLost), and the journal records the write that broke it. The way
// out is that of any engine the controller cannot drive: a force stop
// (signals, not stdin) proves the cohort ended, then recover.
func (c *Controller) stdinBroken(x *execution, ev protocol.Event) {
	cause := x.conn.StdinBroken()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.st.exec != x || c.st.binding != protocol.BindingActive {
		c.publishBindingLocked()
		return
	}
	why := fmt.Sprintf("the engine of execution %s stopped taking input (%v, at event %d): nothing more is written to it; force stop, then recover", x.id, cause, ev.Seq)
	fields := map[string]string{"EXECUTION": x.id, "STATE": protocol.BindingUncertain, "REASON": ev.Reason, "SEQ": fmt.Sprint(ev.Seq)}
	var b *engine.StdinError
	if errors.As(cause, &b) {
		fields["WRITTEN"], fields["RECORD_BYTES"] = fmt.Sprint(b.Written), fmt.Sprint(b.Len)
		if b.Timeout > 0 {
			fields["TIMEOUT"] = b.Timeout.String()
		}
	}
	c.st.binding = protocol.BindingUncertain
	c.closeAdmissionLocked(why) // the binding says why, not only that it is uncertain
	c.markUncertainLocked(why)
	c.publishBindingLocked()
	c.audit(audit.Transition, nil, why, fields)
}
