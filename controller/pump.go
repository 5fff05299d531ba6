package controller

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/scopes"
)

// pump moves the engine's events to the bus, in order, until the engine's
// stdout ends. A native dialog becomes an approval and a fire-and-forget
// update a notice before its event goes out; a dialog request the adapter
// could not read is shown disabled and never answered.
func (c *Controller) pump(x *execution) {
	for ev := range x.conn.Events() {
		if h := c.test.pumpEvent; h != nil {
			h(x.conn)
		}
		switch {
		case ev.UI != nil && protocol.IsForm(ev.UI.Method):
			c.dialogOpened(x, ev.UI)
		case ev.UI != nil:
			c.uiNotice(ev.UI)
		case ev.Kind == protocol.EventUnavailable && (ev.Native == "extension_ui_request" || ev.Reason == protocol.ReasonDuplicateID):
			c.dialogUnread(x, ev)
		case ev.Kind == protocol.EventRunSettled:
			c.runSettled(x, ev.Seq)
		}
		c.bus.publish(ev)
		if ev.Kind == protocol.EventRunSettled {
			c.mu.Lock()
			x.settled++
			c.publishBindingLocked() // the engine is idle again
			c.mu.Unlock()
			c.kickQueue()
		}
		if ev.Kind == protocol.EventUnavailable && ev.Native == "" && (ev.Reason == protocol.ReasonLineTooLong || ev.Reason == protocol.ReasonUndecodable || ev.Reason == protocol.ReasonOutputLost) {
			c.engineLost(x, ev)
		}
		if ev.Kind == protocol.EventUnavailable && ev.Native == "" && ev.Reason == protocol.ReasonStdinBroken {
			c.stdinBroken(x, ev)
		}
	}
}

// dialogUnread tells every client of a dialog request the adapter would
// not hold open: one it cannot read whole, or one repeating the id of a
// decision kept (the first keeps the id; the repeat is journaled).
func (c *Controller) dialogUnread(x *execution, ev protocol.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.st.dialogSeen = true
	msg := "the engine opened a dialog mosaic cannot read whole; it is shown disabled and nobody answers it"
	if ev.Reason == protocol.ReasonDuplicateID {
		msg = "the engine asked again under the id of a decision it asked before; the first keeps the id, the repeat is refused and nobody answers it"
		c.auditEngine("approval-"+protocol.ReasonDuplicateID, msg, map[string]string{"EXECUTION": x.id, "REASON": ev.Reason})
	}
	c.broadcastLocked(protocol.Notice{Record: protocol.RecordNotice, Kind: protocol.NoticeDialog, Message: msg})
}

// watchExit notices the engine process ending. Its exit is not a stop
// and proves nothing about the cohort (tool children may live on): the
// binding and the claim become uncertain unless a force stop already owns
// the ending. An interrupt does not: an engine that dies around its abort
// leaves a cohort nobody proved.
//
// The binding then carries the exit status and the tail of the engine's
// stderr (engineEnd), and the journal entry says the same.
func (c *Controller) watchExit(x *execution) {
	<-x.handle.Done()
	c.unkeep(x)
	end := c.engineEnd(x, "")
	c.mu.Lock()
	defer c.mu.Unlock()
	x.exited = true
	if c.st.exec != x || c.st.forceRunning || c.st.pending != nil || c.st.binding == protocol.BindingStopped {
		return
	}
	if x.end != nil { // the load check failed first: keep what it said
		end.Preflight = x.end.Preflight
	}
	x.end = end
	c.st.binding = protocol.BindingUncertain
	c.closeAdmissionLocked(fmt.Sprintf("the engine of execution %s exited (%s); that is not a stop: force stop to prove the cohort ended", x.id, end.Status))
	c.markUncertainLocked("engine exited without a stop")
	c.unsettleLocked(x, "the engine exited with the dialog open")
	c.publishBindingLocked()
	c.audit(audit.Transition, nil, c.st.reason+endSummary(end), endFields(end, map[string]string{"EXECUTION": x.id, "STATE": protocol.BindingUncertain}))
}

// cohortPath is where an execution's cohort is kept for a restarted
// controller to reattach: beside the claim root, written once.
func (c *Controller) cohortPath(exec string) string {
	return filepath.Join(filepath.Dir(c.cfg.Claims.Root()), "executions", exec+".json")
}

func (c *Controller) saveCohort(co scopes.Cohort) error {
	p := c.cohortPath(co.Execution)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("record cohort: %w", err)
	}
	b, err := json.Marshal(co)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("record cohort %q: %w", p, err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("record cohort %q: %w", p, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("record cohort %q: %w", p, err)
	}
	return f.Close()
}

func (c *Controller) loadCohort(exec string) (scopes.Cohort, error) {
	var co scopes.Cohort
	b, err := os.ReadFile(c.cohortPath(exec))
	if errors.Is(err, fs.ErrNotExist) {
		return co, fmt.Errorf("no recorded cohort for execution %s", exec)
	}
	if err != nil {
		return co, err
	}
	return co, json.Unmarshal(b, &co)
}
