package claims

import (
	"context"
	"errors"
)

// Handover records, on the active claim of an engine that outlives its
// controller (a restart of the controller's service: the engine's
// descriptors wait in the fd store), the session bytes the controller
// vouched for last (Record.Vouched), so that the next controller, which
// re-attaches (Reattach, then Handed), vouches for those and checks what
// follows them instead of vouching for whatever the file holds when it
// looks. The revision is otherwise the same: state active, execution,
// engine and generation unchanged.
//
// Why in the claim: the store is what the next controller reads before
// it talks to the engine, and a revision that says who wrote it is the
// evidence that the bytes were this execution's controller's. Why only
// at a restart: a crashed controller hands over nothing, and a mark left
// from an earlier handover would name fewer bytes than the crashed
// controller vouched for since, so Reattach consumes it (its revision
// drops Vouched, as every transition does).
func (c *Claim) Handover(ctx context.Context, vouched *FileState) error {
	if vouched == nil {
		return errors.New("handover: nothing vouched for")
	}
	return c.advance(ctx, "handover", []State{Active}, func(r *Record) error {
		r.Reason = "controller restarting; the engine stays for the next controller, which takes over the session bytes this one vouched for"
		v := *vouched
		r.Vouched = &v
		return nil
	})
}

// Handed is what the controller before this handle's Reattach, or its
// Recover of an active claim (the engine gone, or not re-attachable, when
// the next controller came), handed over (Handover), nil if it handed
// over nothing (a crash, an older mosaic, any other handle).
func (c *Claim) Handed() *FileState {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.handed == nil {
		return nil
	}
	v := *c.handed
	return &v
}
