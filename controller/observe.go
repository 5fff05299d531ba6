package controller

import (
	"encoding/json"

	"github.com/mosaic-agents/mosaic/history"
	"github.com/mosaic-agents/mosaic/protocol"
)

// observe answers with the binding, a history page read from the session
// file (read-only) and the seam, then replays the current execution's
// events after fromSeq (or after the last settled run) and goes live. The
// replay and the live feed join under one lock, without gap or overlap.
func (c *Controller) observe(k *conn, cmd *protocol.Command) {
	snap, err := history.Read(c.cfg.Conversation.Session, history.Options{})
	if err != nil {
		c.refuse(k, cmd.Request, asRefusal(err))
		return
	}
	page, err := snap.Page("", 0)
	if err != nil {
		c.refuse(k, cmd.Request, asRefusal(err))
		return
	}
	raw, err := json.Marshal(page)
	if err != nil {
		c.refuse(k, cmd.Request, protocol.Wrap(protocol.CodeMalformed, err, "encode the history page: %v", err))
		return
	}
	c.mu.Lock()
	quiet := true
	if x := c.st.exec; x != nil && x.conn != nil {
		ts := x.conn.State()
		quiet = !ts.Running && ts.Slot == nil
	}
	after := c.bus.lastSettled()
	if cmd.FromSeq != nil {
		after = *cmd.FromSeq
	} else if quiet {
		_, _, after = c.bus.window()
	}
	replay, sub, complete := c.bus.subscribe(after)
	exec, from, until := c.bus.window()
	obs := protocol.Observed{Record: "observed", Request: cmd.Request, Binding: c.bindingLocked(), History: raw,
		Seam: protocol.Seam{Execution: exec, Replay: "available", ReplayFrom: from, ReplayUntil: until,
			Quiet: quiet, Reconcile: !complete || !quiet || c.st.reconcile}}
	c.offerLocked(k, obs)
	c.mu.Unlock()
	for _, line := range replay {
		if k.enqueue(line, sendWait) != nil {
			c.bus.unsubscribe(sub)
			return
		}
	}
	k.subscribe(c.bus, sub)
}
