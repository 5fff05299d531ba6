package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/scopes"
)

// Hibernate: the idle policy (conversations.Conversation.IdleStop).
//
// A conversation idle for the policy's duration ends its engine the
// gentle way (stdin EOF, so Pi exits by itself), then stops the cohort as
// a force stop does (TERM to what is left, freeze, kill, observe) and
// records stopped with the cohort proof and the policy (claims
// PolicyHibernate), then the controller exits (Hibernated). The next
// client connection socket-activates a controller that finds that
// revision and launches on the same leaf without a confirmation (wake):
// the one launch without one, allowed because the stop was the policy's
// own, proven, with nothing in flight, on exactly the bytes the
// controller vouched for at the stop (claims.Record.Vouched). Anything
// else (a hibernate that ended uncertain, a force stop, a boot proof, a
// leaf that moved, a file whose bytes changed at all) needs recover.

// idleLocked is the one predicate of the idle policy: "" when the
// conversation is idle, else why not. Callers hold mu. Tool processes are
// counted outside the lock (idleTools), since it reads the cgroup.
func (c *Controller) idleLocked(x *execution) string {
	if why := c.quietLocked(x); why != "" {
		return why
	}
	if len(c.conns) > 0 {
		return "a client is connected"
	}
	return ""
}

// quietLocked is idleLocked without the clients: what a stop of the
// service asks (shutdown.go), whose clients are being let go anyway.
func (c *Controller) quietLocked(x *execution) string {
	switch {
	case c.st.exec != x || x.conn == nil || x.exited:
		return "no engine this controller talks to"
	case c.st.binding != protocol.BindingActive:
		return "binding " + c.st.binding
	case c.st.stopRunning || c.st.forceRunning || c.st.pending != nil:
		return "a stop is under way"
	}
	if ts := x.conn.Turn(); ts.Running || ts.Slot != nil || ts.Fenced || ts.Uncertain || len(ts.OpenTools) > 0 {
		return "a run, a prompt or a tool call is in progress"
	}
	if why := c.queuedLocked(); why != "" {
		return why
	}
	if why := c.pendingApprovalLocked(); why != "" {
		return why
	}
	return ""
}

// queuedLocked is the idle policy's check for queued prompts: "" when
// no item waits (queued, or dispatched and not yet settled). A paused
// queue counts: its items are the user's to resume, and a hibernate would
// leave them to a wake that never dispatches on its own.
func (c *Controller) queuedLocked() string {
	if n, _ := c.waitingLocked(); n > 0 {
		return fmt.Sprintf("%d queued prompt(s) wait", n)
	}
	return ""
}

// pendingApprovalLocked is the idle policy's check for native decisions:
// "" when the engine holds no dialog open and no approval waits for an
// answer.
func (c *Controller) pendingApprovalLocked() string {
	if n := c.pendingApprovalsLocked(); n > 0 {
		return fmt.Sprintf("%d approval(s) wait for an answer", n)
	}
	if c.nativeDialogOpenLocked() {
		return "the engine holds a native dialog open"
	}
	return ""
}

// idleTools is the idle policy's check for tool processes: "" when the
// cohort holds the engine alone.
func idleTools(h *scopes.Handle) string {
	n, err := h.ToolProcesses()
	switch {
	case err != nil:
		return "the cohort cannot be read: " + err.Error()
	case n > 0:
		return fmt.Sprintf("%d tool processes are alive in the cohort", n)
	}
	return ""
}

// idleNow is the idle policy's whole check: check (idleLocked, or
// quietLocked for a stop of the service) under mu, then the tool
// processes and the session file, read outside the lock.
func (c *Controller) idleNow(x *execution, check func(*execution) string) string {
	c.mu.Lock()
	why := check(x)
	c.mu.Unlock()
	if why == "" {
		why = idleTools(x.handle)
	}
	if why == "" {
		why = c.idleSession(x)
	}
	return why
}

// Hibernated is closed when the controller hibernated its conversation:
// the caller (serve) then stops serving and exits, and the socket
// activates the next controller, which wakes the conversation.
func (c *Controller) Hibernated() <-chan struct{} { return c.hibernated }

// watchIdle runs the idle policy for execution x: once it found the
// conversation idle for the whole policy duration, it hibernates.
func (c *Controller) watchIdle(x *execution) {
	d := c.cfg.Conversation.IdleStopDuration()
	if d <= 0 {
		return
	}
	tick := min(max(d/8, 100*time.Millisecond), 5*time.Second)
	t := time.NewTicker(tick)
	defer t.Stop()
	var since time.Time // when the conversation was last seen busy; zero: now
	for {
		select {
		case <-c.closing:
			return
		case <-t.C:
		}
		c.mu.Lock()
		gone := c.st.exec != x
		c.mu.Unlock()
		if gone {
			return
		}
		if why := c.idleNow(x, c.idleLocked); why != "" || since.IsZero() {
			since = time.Now()
			continue
		}
		if time.Since(since) < d {
			continue
		}
		if c.hibernate(x, "idle for "+d.String(), c.idleLocked) {
			return
		}
		since = time.Now()
	}
}

// hibernate ends x's engine the idle policy's way, idle saying why:
// "idle for 5m0s", or "idle as its service stopped" (shutdown.go). It
// returns false when the conversation was no longer idle by the check
// (idleLocked, or quietLocked for a stop of the service) made under the
// dispatch lock (nothing done).
func (c *Controller) hibernate(x *execution, idle string, check func(*execution) string) bool {
	unlock := c.lockDispatch()
	if why := check(x); why != "" {
		unlock()
		return false
	}
	s := &protocol.Stop{Record: protocol.RecordStop, ID: newID("s-"), Kind: protocol.KindHibernate, Execution: x.id}
	if prev := c.st.stop; prev != nil {
		s.Predecessor = prev.ID
	}
	c.st.stop, c.st.stopRunning, c.st.forceRunning = s, true, true
	c.st.hibernateWhy = idle
	c.beginStoppingLocked()
	c.closeAdmissionLocked(fmt.Sprintf("hibernating: %s (stop %s)", idle, s.ID))
	c.transitionLocked(s, protocol.StopFenced, "admission closed: "+idle)
	c.publishBindingLocked()
	unlock()
	c.audit(audit.Transition, nil, fmt.Sprintf("execution %s %s: hibernating (stop %s)", x.id, idle, s.ID),
		map[string]string{"EXECUTION": x.id, "STOP": s.ID, "IDLE": idle})

	c.stopping.add(1)
	defer c.stopping.add(-1)
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	refused := c.recordStopping(ctx, nil, s.ID, "hibernate "+s.ID)
	// The gentle way first: stdin EOF, and Pi exits by itself. The fd
	// store's copy of stdin (keep) would hold the pipe open past this
	// close, and the engine, never reading EOF, would cost every
	// hibernate the whole grace and then a TERM.
	c.unkeepStdin(x)
	x.conn.Close()
	select {
	case <-x.handle.Done():
	case <-time.After(c.cfg.Grace):
	}
	c.mu.Lock()
	c.transitionLocked(s, protocol.StopStopping, "stdin closed; TERM to what is left, then freeze, kill and observe"+refused)
	c.mu.Unlock()
	res := x.handle.Stop(ctx, scopes.StopOptions{Stop: s.ID, Grace: c.cfg.Grace})
	c.finishStop(ctx, x, s, res)
	c.mu.Lock()
	proven := c.st.binding == protocol.BindingStopped
	c.mu.Unlock()
	if !proven {
		c.audit(audit.Transition, nil, fmt.Sprintf("hibernate %s of execution %s ended without a proof; the controller stays", s.ID, x.id),
			map[string]string{"EXECUTION": x.id, "STOP": s.ID})
		return true
	}
	c.audit(audit.Stop, nil, fmt.Sprintf("execution %s hibernated with a proof (stop %s); the next client wakes it", x.id, s.ID),
		map[string]string{"EXECUTION": x.id, "STOP": s.ID})
	close(c.hibernated)
	return true
}

// wake launches a hibernated conversation again, without a confirmation,
// when the claim's stopped revision is the idle policy's, proven, with the
// same pins and the session file still on the leaf it hibernated on,
// holding exactly the bytes the stop recorded (when it recorded any). It
// returns false (and changes nothing) otherwise: then the conversation
// stays stopped and needs recover.
func (c *Controller) wake(ctx context.Context, head sessionHead, keys claims.Keys, claim *claims.Claim) (bool, error) {
	rec := claim.Record()
	if err := claims.Wakeable(&rec); err != nil {
		return false, nil // a stop that was not the idle policy's: recover
	}
	cv, err := c.settings()
	if err != nil {
		c.notWoken("the conversation's settings cannot be read: %v; fix them (mosaicctl doctor), then recover", err)
		return false, nil
	}
	spec, err := c.spec(ctx, cv)
	if err != nil {
		c.notWoken("the engine cannot be launched as pinned: %v; recover", err)
		return false, nil
	}
	if pins := pinsOf(cv, spec); pins != rec.Pins {
		c.notWoken("the launch changed since the hibernate (pins %+v, now %+v); recover", rec.Pins, pins)
		return false, nil
	}
	// The file's own keys, not the ones start followed to this claim:
	// those match the claim whatever the file holds now.
	if r := c.sessionRefusal(&rec, head, c.keys(head)); r != nil {
		c.notWoken("%s", r.Message)
		return false, nil
	}
	if head.leaf != rec.Leaf {
		c.notWoken("the session moved from leaf %q to %q; recover", rec.Leaf, head.leaf)
		return false, nil
	}
	// No engine ran while it hibernated, so any byte that is not what the
	// stop vouched for was another writer's: an entry rewritten in place
	// (the header and the leaf kept, so neither check above sees it) or
	// one appended. A woken engine would send that history to the model as
	// the conversation's; recover says what it found (recover.go).
	if ch := historyChange(&rec, head); ch != historySame {
		c.notWoken("%s, and no engine ran while it hibernated: another writer changed its history; `mosaicctl recover` names the change and the way on", describeChange(&rec, head, ch))
		return false, nil
	}
	keys.Session = rec.Session
	c.mu.Lock()
	c.st.generation++
	c.mu.Unlock()
	c.audit(audit.Launch, nil, fmt.Sprintf("waking hibernated execution %s on leaf %q (proof %s)", rec.Execution, rec.Leaf, rec.Proof.Digest),
		map[string]string{"EXECUTION": rec.Execution, "PROOF_DIGEST": rec.Proof.Digest})
	return true, c.launch(ctx, head, keys, rec.Leaf)
}

// notWoken journals why a hibernated conversation stays stopped: the
// binding only says stopped, and recover is the way on.
func (c *Controller) notWoken(format string, args ...any) {
	c.audit(audit.Transition, nil, "hibernated conversation not woken: "+fmt.Sprintf(format, args...), nil)
}

// idleSession says the session file holds entries the session watcher
// has not vouched for yet (it polls): a hibernate now would record the
// leaf before the last turn's entries, and the wake would find the
// session moved and refuse.
func (c *Controller) idleSession(x *execution) string {
	n, err := c.sessionSize()
	switch {
	case err != nil:
		return "the session file cannot be read: " + err.Error()
	case n > x.checked.Load():
		return "the session file has entries not checked yet"
	}
	return ""
}
