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
// A stop that already ended stopped (refused "already stopped with a
// proof" after this verb's confirmation) is that outcome too. It happens
// when the advice of `conv rm` is followed after the engine itself
// exited: a controller restarted on the orphan stops what is left of the
// cohort on its own. Any other error is returned unchanged.
func (s *session) joinRunningStop(ctx context.Context, err error) (*protocol.Receipt, error) {
	var r *protocol.Refusal
	if !errors.As(err, &r) || r.Code != protocol.CodeFenced {
		return nil, err
	}
	running, stopped := strings.Contains(r.Message, "already running"), strings.Contains(r.Message, "already stopped")
	b := s.c.State().Binding
	id := runningStopID(b, r.Message)
	if id == "" || !running && !stopped {
		return nil, err
	}
	ended := func(u client.Update) bool { return u.Stop != nil && u.Stop.ID == id && stopEnded(u.Stop.State) }
	var st *protocol.Stop
	for _, u := range s.tape.all() {
		if ended(u) {
			st = u.Stop
		}
	}
	switch {
	case st != nil:
	case stopped && b != nil && b.State == protocol.BindingStopped:
		// It ended before this connection could see its record.
		st = &protocol.Stop{ID: id, State: protocol.ReceiptStopped, Execution: b.Execution}
	default:
		fmt.Fprintf(s.out, "a force stop was already running (%s); following it to its end\n", id)
		i := 0
		u, werr := s.tape.find(ctx, &i, ended)
		if werr != nil {
			return nil, unknown("the force stop %s that was already running did not end while this verb waited (%v); see `mosaicctl status %s`", id, werr, s.id)
		}
		st = u.Stop
	}
	fmt.Fprintf(s.out, "force stop %s, already under way when this one was asked, ended %s\n", id, st.State)
	return &protocol.Receipt{Record: protocol.RecordReceipt, ID: "-", Command: protocol.CmdForceStop, State: st.State,
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
