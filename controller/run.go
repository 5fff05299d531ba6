package controller

import (
	"context"
	"errors"
	"fmt"

	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/protocol"
)

// Start classifies what a previous controller left and launches the
// engine when the conversation is free. An error means this controller
// must not serve (another live controller holds the conversation: H16);
// anything else that goes wrong leaves the binding uncertain, served, so a
// client can see why and force stop.
func (c *Controller) Start(ctx context.Context) error {
	c.loadQueue()
	// The scheduler's engine calls take the serving context, as a
	// prompt's did: a shutdown ends a dispatch waiting for Pi's answer
	// delivery-unknown at once.
	qctx, cancel := context.WithCancel(ctx)
	go func() { <-c.closing; cancel() }()
	go c.schedule(qctx)
	c.writes.Add(1) // Close waits for its last relay
	go c.relayAuthLoop()
	err := c.start(ctx)
	if err == nil {
		return nil
	}
	var taken seatTaken
	if protocol.CodeOf(err) == protocol.CodeAlreadyActive && !errors.As(err, &taken) {
		return err
	}
	c.audit(audit.Transition, nil, fmt.Sprintf("start of %s: %v", c.cfg.Conversation.ID, err),
		map[string]string{"STATE": protocol.BindingUncertain, "REFUSAL": protocol.CodeOf(err)})
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.st.binding == protocol.BindingIdle || c.st.binding == protocol.BindingLaunching {
		c.st.binding = protocol.BindingUncertain
	}
	if c.st.claim == nil {
		c.st.binding = protocol.BindingIdle
	}
	c.closeAdmissionLocked(err.Error())
	c.publishBindingLocked()
	return nil
}

// Close releases what the controller holds in this process and waits for
// the stops under way and the claim writes it started. It does not stop
// the engine: a force stop does, or Shutdown before a controller exits for
// good, and the engine exits by itself when its stdin goes away. Under
// systemd the fd store keeps a copy of that stdin (resume.go), so a
// restart of the controller service does not end the engine. A force stop under way
// finishes (its own timeouts bound it) so the claim and the stop end
// stopped or uncertain, never stopping; an interrupt under way ends
// uncertain, its engine having lost stdin.
func (c *Controller) Close() {
	c.mu.Lock()
	x := c.st.exec
	c.mu.Unlock()
	if x != nil && x.conn != nil {
		x.conn.Close()
	}
	c.stopping.wait()
	c.closed.Do(func() { close(c.closing) })
	c.writes.Wait()
}
