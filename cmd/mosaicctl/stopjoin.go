package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/mosaic-agents/mosaic/client"
	"github.com/mosaic-agents/mosaic/protocol"
)

// joinRunningStop follows a force stop that was already running when this
// verb's own was refused fenced for it, and returns its outcome as the
// verb's: the verb asked for the cohort stopped, and that stop decides it.
// It happens when the advice of `conv rm` is followed after the engine
// itself exited: a controller restarted on the orphan stops what is left
// of the cohort on its own. Any other error is returned unchanged.
func (s *session) joinRunningStop(ctx context.Context, err error) (*protocol.Receipt, error) {
	var r *protocol.Refusal
	if !errors.As(err, &r) || r.Code != "fenced" || !strings.Contains(r.Message, "already running") {
		return nil, err
	}
	id := runningStopID(s.c.State().Binding, r.Message)
	if id == "" {
		return nil, err
	}
	fmt.Fprintf(s.out, "a force stop was already running (%s); following it to its end\n", id)
	i := 0
	u, werr := s.tape.find(ctx, &i, func(u client.Update) bool {
		return u.Stop != nil && u.Stop.ID == id && stopEnded(u.Stop.State)
	})
	if werr != nil {
		return nil, unknown("the force stop %s that was already running did not end while this verb waited (%v); see `mosaicctl status %s`", id, werr, s.id)
	}
	st := u.Stop
	return &protocol.Receipt{Record: "receipt", ID: "-", Command: protocol.CmdForceStop, State: st.State,
		Stop: st.ID, Execution: st.Execution, Reason: st.Reason}, nil
}

// runningStopID names the running stop: the binding's last stop, else the
// s- id the refusal names.
func runningStopID(b *protocol.Binding, message string) string {
	if b != nil && b.LastStop != "" {
		return b.LastStop
	}
	for _, f := range strings.Fields(message) {
		if strings.HasPrefix(f, "s-") {
			return f
		}
	}
	return ""
}

// stopEnded reports whether a stop record's state is final.
func stopEnded(state string) bool {
	switch state {
	case protocol.ReceiptStopped, protocol.ReceiptUncertain, "reconciled", "superseded":
		return true
	}
	return false
}
