package claims

import (
	"context"
	"errors"
	"fmt"

	"github.com/mosaic-agents/mosaic/protocol"
)

// Request is what a controller claims a conversation with.
type Request struct {
	Keys         Keys
	Binding      string
	Harness      string
	Conversation string
	Branch       string
	Leaf         string
	Pins         Pins
	// Written is the header id of the session file the launch found
	// (Record.Written); empty when there was none.
	Written string
	// Execution is the id of the execution about to be launched.
	Execution string
}

func (r Request) validate() error {
	if err := r.Keys.validate(); err != nil {
		return err
	}
	if r.Binding == "" || r.Harness == "" || r.Conversation == "" || r.Execution == "" {
		return fmt.Errorf("binding, harness, conversation and execution are required: %w", ErrInvalid)
	}
	return nil
}

// Acquire takes both keys for a new claim in state reserved, generation 1.
// It refuses already-active if either key is reserved or active (W1, W2,
// W4) and unsafe-replacement if either is stopping, uncertain, stopped
// without a verified proof, or unreadable (W3). It never leaves a partial
// claim behind: if it loses the session key after taking the seat key it
// releases the seat key before refusing. A reservation left by a crashed
// controller is released by Recover, not here.
func (s *Store) Acquire(ctx context.Context, req Request) (*Claim, error) {
	if err := req.validate(); err != nil {
		return nil, protocol.Wrap(protocol.CodeClaimState, err, "acquire")
	}
	v, err := s.load(ctx, req.Keys)
	if err != nil {
		return nil, refuseLoad(err)
	}
	if cur := v.seat.current(); !free(cur) {
		return nil, refuseHeld("seat", cur)
	}
	if cur := v.session.current(); !free(cur) {
		return nil, refuseHeld("session", cur)
	}
	self, err := s.host.Self()
	if err != nil {
		return nil, protocol.Wrap(protocol.CodeClaimStore, err, "acquire: identify controller")
	}
	rec := Record{
		Format: formatVersion, Claim: s.newID(), Seq: 1, Seat: req.Keys.Seat, Session: req.Keys.Session,
		Binding: req.Binding, Harness: req.Harness, Conversation: req.Conversation,
		Branch: req.Branch, Leaf: req.Leaf, Pins: req.Pins, Execution: req.Execution,
		Written: req.Written, Controller: self, Generation: 1, State: Reserved,
	}
	return s.take(ctx, v, req.Keys, rec)
}

// take publishes a new reservation under the seat key, then the session
// key, undoing the seat key if the session key cannot be had.
func (s *Store) take(ctx context.Context, v *view, keys Keys, rec Record) (*Claim, error) {
	seatRec := rec
	seatRec.KeyKind, seatRec.Revision = kindSeat, v.seat.next()
	if err := s.publish(v.seat.dir, seatRec); err != nil {
		if errors.Is(err, ErrRevisionExists) {
			return nil, s.refuseLost(ctx, keys, err)
		}
		// The revision may have landed before the failure (a failed
		// directory fsync); release it if so.
		return nil, s.undo(ctx, keys, rec, refuseWrite(err, "acquire: write seat key"))
	}
	c := &Claim{s: s, keys: keys, rec: seatRec}
	if err := s.fault(FaultBetweenKeys, v.session.dir); err != nil {
		return nil, s.undo(ctx, keys, rec, refuseWrite(err, "acquire: write session key"))
	}
	sessRec := rec
	sessRec.KeyKind, sessRec.Revision = kindSession, v.session.next()
	err := s.publish(v.session.dir, sessRec)
	if err == nil {
		return c, nil
	}
	if errors.Is(err, ErrRevisionExists) {
		if sl, rerr := readSlot(v.session.dir, kindSession); rerr == nil {
			if got := sl.current(); got != nil && sameRevision(*got, sessRec) {
				return c, nil // a settler completed it for us
			}
		}
		return nil, s.undo(ctx, keys, rec, s.refuseLost(ctx, keys, err))
	}
	return nil, s.undo(ctx, keys, rec, refuseWrite(err, "acquire: write session key"))
}

// refuseLost explains a lost exclusive create with the winner's state.
func (s *Store) refuseLost(ctx context.Context, keys Keys, cause error) error {
	if v, err := s.load(ctx, keys); err == nil {
		for _, sl := range []struct {
			name string
			rec  *Record
		}{{"seat", v.seat.current()}, {"session", v.session.current()}} {
			if !free(sl.rec) {
				return refuseHeld(sl.name, sl.rec)
			}
		}
	}
	return protocol.Wrap(protocol.CodeAlreadyActive, cause, "another controller took the claim first")
}

// undo releases a reservation this call may have published, so a refusal
// leaves no partial claim; it returns refusal, joined with any failure to
// undo (the reservation then stays held until Recover releases it after
// this process exits: held, never falsely free).
func (s *Store) undo(ctx context.Context, keys Keys, rec Record, refusal error) error {
	v, err := s.load(ctx, keys)
	if err != nil {
		return errors.Join(refusal, fmt.Errorf("undo reservation %s: %w", rec.Claim, err))
	}
	cur := v.seat.current()
	if cur == nil || cur.Claim != rec.Claim {
		return refusal // never landed
	}
	c := &Claim{s: s, keys: keys, rec: *cur}
	if cur.State == Stopped {
		return refusal
	}
	if err := c.Abandon(ctx, "acquire did not complete"); err != nil {
		return errors.Join(refusal, fmt.Errorf("undo reservation %s: %w", rec.Claim, err))
	}
	return refusal
}
