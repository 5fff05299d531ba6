package controller

import (
	"context"
	"fmt"

	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/protocol"
)

// takeover moves control to k: one wins per generation (H1), the old
// controller becomes an observer and is fenced (H2, H15). It commits under
// the dispatch lock, so a prompt being written either finished first (its
// receipt keeps the old controller) or is refused at dispatch (H3).
func (c *Controller) takeover(ctx context.Context, k *conn, cmd *protocol.Command) (*outcome, error) {
	defer c.lockDispatch()()
	if r := c.mayGainControlLocked(k, cmd); r != nil {
		return nil, r
	}
	if c.fencedLocked() {
		return nil, protocol.Refuse(protocol.CodeFenced, "admission is closed (%s); ordinary takeover is refused while fenced: use acquire-recovery-control", c.st.reason)
	}
	return done(c.commitControlLocked(k, cmd.Request, "takeover")), nil
}

// lockDispatch takes the dispatch lock, then mu, in the one order every
// holder of both takes them, and returns what releases both.
func (c *Controller) lockDispatch() (unlock func()) {
	c.dispatch.Lock()
	c.mu.Lock()
	return func() {
		c.mu.Unlock()
		c.dispatch.Unlock()
	}
}

// mayGainControlLocked is what every way of gaining control checks first:
// the peer is not an engine's tool, it does not hold control already, and
// it names the current generation. Callers hold the dispatch lock and mu.
func (c *Controller) mayGainControlLocked(k *conn, cmd *protocol.Command) *protocol.Refusal {
	switch {
	case k.enginePeer():
		return protocol.Refuse(protocol.CodeEnginePeer, "this peer is an engine peer (an agent's tool, or a process that cannot be vouched for); it may observe, never take control")
	case c.st.controller == k.id:
		return protocol.Refuse(protocol.CodeAlreadyController, "this connection already holds control (generation %d)", c.st.generation)
	case cmd.Generation == nil || *cmd.Generation != c.st.generation:
		return protocol.Refuse(protocol.CodeStaleGeneration, "the controller generation is %d, not the expected one; someone else took control", c.st.generation)
	}
	return nil
}

// fencedLocked is true while admission is closed by something other than
// the plain absence of an engine: an interrupt, a stop, an uncertain
// binding.
func (c *Controller) fencedLocked() bool {
	switch c.st.binding {
	case protocol.BindingActive:
		return !c.st.admission
	case protocol.BindingIdle:
		return false
	default:
		return true
	}
}

// acquireRecoveryControl binds an observer while admission is closed and
// the previous controller is gone or revoked, with a confirmation. It
// raises the generation without reopening admission or launching.
func (c *Controller) acquireRecoveryControl(ctx context.Context, k *conn, cmd *protocol.Command) (*outcome, error) {
	defer c.lockDispatch()()
	if r := c.mayGainControlLocked(k, cmd); r != nil {
		return nil, r
	}
	switch {
	case !c.fencedLocked():
		return nil, protocol.Refuse(protocol.CodeFenced, "admission is open; use an ordinary takeover")
	case c.st.controller != "" && c.conns[c.st.controller] != nil:
		return nil, protocol.Refuse(protocol.CodeControllerPresent, "the controller %s is still connected", c.st.controller)
	}
	if err := c.useConfirmationLocked(k, cmd.Confirmation, protocol.CmdAcquireRecoveryControl); err != nil {
		return nil, err
	}
	return done(c.commitControlLocked(k, cmd.Request, "recovery-control")), nil
}

// commitControlLocked gives k control at generation+1 and tells everyone.
func (c *Controller) commitControlLocked(k *conn, request, how string) protocol.ControlRecord {
	old := c.st.controller
	c.st.generation++
	c.takeQueueLocked(k, how)
	c.st.controller = k.id
	if old != "" && c.conns[old] != nil {
		c.st.revoked[old] = true // a gone connection needs no fence: its id never returns
	}
	delete(c.st.revoked, k.id)
	// Confirmations are bound to a generation: every one issued before
	// this change is now stale (H17).
	for _, cf := range c.confs {
		if cf.rec.State == protocol.ConfirmationIssued || cf.rec.State == protocol.ConfirmationAnswered {
			cf.rec.State = protocol.ConfirmationExpired
		}
	}
	c.reprojectLocked()
	rec := protocol.ControlRecord{Record: protocol.RecordControl, Request: request, Generation: c.st.generation, Controller: k.id, Mode: "controller", Revoked: old}
	for _, other := range c.conns {
		if other.hello && other != k {
			o := rec
			o.Request, o.Mode = "", "observer"
			c.offerLocked(other, o)
		}
	}
	c.publishBindingLocked()
	c.audit(audit.Takeover, k, fmt.Sprintf("%s: connection %s controls at generation %d (was %q)", how, k.id, c.st.generation, old),
		map[string]string{"GENERATION": fmt.Sprint(c.st.generation), "REVOKED": old, "HOW": how})
	return rec
}

// offerLocked queues one record for one connection without waiting.
func (c *Controller) offerLocked(k *conn, v any) {
	line, err := protocol.Line(v)
	if err == nil {
		k.offer(line)
	}
}
