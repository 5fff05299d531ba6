package controller

import (
	"fmt"
	"strings"

	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/protocol"
)

// admissionLocked is the one answer to "may a prompt be admitted now?",
// nil for yes. The binding's admission field and admit both read it, so a
// client is never told open while prompts are refused.
//
// st.admission is only the controller's own gate (closed by interrupts,
// stops, launch, foreign writers). Admission as clients see it also needs
// an active binding and an engine connection that neither fenced itself
// nor lost output: the engine's tracker refuses prompts then whatever the
// controller's gate says, so it is read here too.
func (c *Controller) admissionLocked() *protocol.Refusal {
	closed := func(format string, args ...any) *protocol.Refusal {
		return protocol.Refuse(protocol.CodeFenced, "this conversation takes no prompt now (admission is closed): "+format, args...)
	}
	x := c.st.exec
	switch {
	case x == nil:
		return protocol.Refuse(protocol.CodeNoEngine, "no engine runs in this conversation (%s)", c.st.binding)
	case x.conn == nil && x.handle == nil:
		// Found at restart without its cohort: no force stop here can
		// reach it, so the way out is the one the force stop names.
		return closed("this controller holds neither a connection to the engine of execution %s nor its cohort, and the engine may still run (%s): %s", x.id, c.st.binding, c.wayOutLocked())
	case x.conn == nil:
		// An engine found at restart, or one whose pipes its driver did
		// not take: it may still run, so not no-engine ("nothing to act
		// on"), and nothing here can prompt it.
		return closed("this controller holds no connection to the engine of execution %s, which may still run (%s); force stop to prove its cohort ended, then recover", x.id, c.st.binding)
	case c.st.binding == protocol.BindingLaunching:
		return protocol.Refuse(protocol.CodePreflight, "the engine is still starting")
	case c.st.preflight != "":
		return protocol.Refuse(protocol.CodePreflight, "the load check did not pass: %s", c.st.preflight)
	case !c.st.admission:
		return closed("%s", c.st.reason)
	case x.exited:
		return closed("the engine of execution %s exited", x.id)
	}
	switch ts := x.conn.Turn(); {
	case ts.Uncertain:
		return closed("engine output was lost (%s); force stop, then recover", strings.Join(ts.Reasons, "; "))
	case ts.Fenced:
		return closed("an interrupt is ending the turn; the engine takes prompts again once it settled")
	case c.st.binding != protocol.BindingActive:
		return closed("its engine is %s", c.st.binding)
	}
	return nil
}

// admissionFieldsLocked projects admissionLocked for the binding record:
// the controller's own reason when its gate is closed, else the refusal's.
func (c *Controller) admissionFieldsLocked() (state, reason string) {
	r := c.admissionLocked()
	switch {
	case r == nil:
		return protocol.AdmissionOpen, ""
	case !c.st.admission && c.st.reason != "":
		return protocol.AdmissionClosed, c.st.reason
	}
	return protocol.AdmissionClosed, strings.TrimPrefix(r.Message, "admission is closed: ")
}

// engineLost is the engine connection reporting a line it could not read
// (over the framing limit, or not JSON) or events it dropped (output-lost:
// the pump fell behind its byte bound): what they carried is gone, so the
// binding becomes uncertain, as it does for an engine exit, and clients
// learn it now rather than at their next prompt.
func (c *Controller) engineLost(x *execution, ev protocol.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.st.exec != x || c.st.binding != protocol.BindingActive {
		c.publishBindingLocked()
		return
	}
	at := fmt.Sprintf("%s at event %d", ev.Reason, ev.Seq)
	fields := map[string]string{"EXECUTION": x.id, "STATE": protocol.BindingUncertain, "REASON": ev.Reason, "SEQ": fmt.Sprint(ev.Seq)}
	if ev.Reason == protocol.ReasonOutputLost {
		at += fmt.Sprintf(", %d engine event(s) dropped", ev.Dropped)
		fields["DROPPED"] = fmt.Sprint(ev.Dropped)
	}
	why := fmt.Sprintf("engine output of execution %s was lost (%s); force stop, then recover", x.id, at)
	c.st.binding = protocol.BindingUncertain
	c.closeAdmissionLocked(why) // the binding says why, not only that it is uncertain
	c.markUncertainLocked(why)
	c.publishBindingLocked()
	c.audit(audit.Transition, nil, why, fields)
}
