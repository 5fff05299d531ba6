package claims

import (
	"context"
	"errors"
	"slices"
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
// at a restart: a revision per vouch would cost fsyncs per frame; a
// crashed controller writes none, and what it vouched for since an
// earlier handover would be more than that handover names, so Reattach
// consumes it (its revision drops Vouched, as every transition does).
// After a crash the next controller takes the mark the controller kept
// in the fd store instead (controller/markkeep.go).
//
// announced are what the controller's engine connection announced last
// (at most MaxAnnouncements, the latest kept): the lines of frames it
// read and prompts it sent may land after the restart, where only they
// prove them.
func (c *Claim) Handover(ctx context.Context, vouched *FileState, announced []Announcement) error {
	if vouched == nil {
		return errors.New("handover: nothing vouched for")
	}
	if len(announced) > MaxAnnouncements {
		announced = announced[len(announced)-MaxAnnouncements:]
	}
	return c.advance(ctx, "handover", []State{Active}, func(r *Record) error {
		r.Reason = "controller restarting; the engine stays for the next controller, which takes over the session bytes this one vouched for"
		v := *vouched
		r.Vouched = &v
		r.Announced = slices.Clone(announced)
		return nil
	})
}

// Announcement is one line's proof a restarting controller hands the
// next with its bytes (Handover): the uuid of a frame its engine
// connection read, or of a prompt it sent, and the SHA-256 of what that
// line says (hclaude.Said, lowercase hex).
type Announcement struct {
	UUID   string `json:"uuid"`
	Said   string `json:"said"`
	Prompt bool   `json:"prompt,omitempty"`
}

// MaxAnnouncements bounds what a handover records: the CLI writes a line
// at most 80 ms after its frame (measured), so the lines still to come
// at a restart are a few.
const MaxAnnouncements = 64

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

// HandedAnnounced is what was handed over with Handed's bytes: the
// announcements whose lines may land after the restart.
func (c *Claim) HandedAnnounced() []Announcement {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.handedSaid)
}
