package claims

import (
	"context"
	"errors"
	"fmt"
)

// view is both key directories of one Keys, read after settling.
type view struct {
	seat, session *slot
}

// load reads both keys and settles them: a claim revision always reaches
// the seat key first, so a session key that lags its claim's seat key is
// rolled forward, and a reservation that never reached its session key is
// completed (session free) or, once its writer is gone, released. Each
// settling write is itself a revision published exclusively, so settlers
// racing each other or the original writer can only agree.
func (s *Store) load(ctx context.Context, keys Keys) (*view, error) {
	const rounds = 8
	for range rounds {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		v, err := s.read(keys)
		if err != nil {
			return nil, err
		}
		changed, err := s.settle(keys, v)
		if err != nil {
			return nil, err
		}
		if !changed {
			return v, nil
		}
	}
	return nil, fmt.Errorf("claim keys of session %q still changing after %d reads: %w", keys.Session, rounds, ErrStale)
}

func (s *Store) read(keys Keys) (*view, error) {
	seat, err := readSlot(s.seatDir(keys.Seat), kindSeat)
	if err != nil {
		return nil, err
	}
	session, err := readSlot(s.sessionDir(keys.Session), kindSession)
	if err != nil {
		return nil, err
	}
	return &view{seat: seat, session: session}, nil
}

// slotsOf returns the slots of rec's own keys, reusing v's when they match.
func (s *Store) slotsOf(keys Keys, v *view, rec *Record) (seat, session *slot, err error) {
	seat, session = v.seat, v.session
	if rec.Seat != keys.Seat {
		if seat, err = readSlot(s.seatDir(rec.Seat), kindSeat); err != nil {
			return nil, nil, err
		}
	}
	if rec.Session != keys.Session {
		if session, err = readSlot(s.sessionDir(rec.Session), kindSession); err != nil {
			return nil, nil, err
		}
	}
	return seat, session, nil
}

// settle performs at most one repair and reports whether it wrote.
func (s *Store) settle(keys Keys, v *view) (bool, error) {
	// The claim on the seat key, against its own session key.
	if cur := v.seat.current(); cur != nil {
		_, sess, err := s.slotsOf(keys, v, cur)
		if err != nil {
			return false, err
		}
		sc := sess.current()
		switch {
		case sc != nil && sc.Claim == cur.Claim && sc.Seq < cur.Seq:
			return s.copyInto(sess, *cur)
		case sc != nil && sc.Claim == cur.Claim:
			// in step
		case cur.State == Reserved && cur.Engine == nil && cur.Launcher == nil:
			// A reservation that never reached its session key.
			if free(sc) {
				return s.copyInto(sess, *cur)
			}
			gone, err := s.gone(cur.Controller)
			if err != nil || !gone {
				return false, err
			}
			return s.release(v.seat, cur, "session key taken by another claim before this reservation reached it")
		}
	}
	// The claim on the session key, against its own seat key, which may
	// hold a later revision of it even if the seat has moved on since.
	if cur := v.session.current(); cur != nil {
		seat, _, err := s.slotsOf(keys, v, cur)
		if err != nil {
			return false, err
		}
		if latest := latestOf(seat, cur.Claim); latest != nil && latest.Seq > cur.Seq {
			return s.copyInto(v.session, *latest)
		}
	}
	return false, nil
}

// latestOf is the highest revision of claim in sl.
func latestOf(sl *slot, claim string) *Record {
	for i := len(sl.revs) - 1; i >= 0; i-- {
		if sl.revs[i].Claim == claim {
			return &sl.revs[i]
		}
	}
	return nil
}

// copyInto publishes rec as the next revision of sl. Losing the exclusive
// create counts as a change: the caller reads again.
func (s *Store) copyInto(sl *slot, rec Record) (bool, error) {
	rec.KeyKind, rec.Revision = sl.kind, sl.next()
	if err := s.publish(sl.dir, rec); err != nil && !errors.Is(err, ErrRevisionExists) {
		return false, err
	}
	return true, nil
}

// release writes `stopped` with an unlaunched proof for a reservation whose
// writer is gone. It never reached its session key, so only the seat key
// is written.
func (s *Store) release(seat *slot, cur *Record, reason string) (bool, error) {
	next, err := s.unlaunched(cur, reason)
	if err != nil {
		return false, err
	}
	if _, err := s.copyInto(seat, next); err != nil {
		return false, err
	}
	return true, nil
}

func (s *Store) unlaunched(cur *Record, reason string) (Record, error) {
	next := *cur
	pr, err := newUnlaunchedRecord(cur, reason)
	if err != nil {
		return next, err
	}
	self, err := s.host.Self()
	if err != nil {
		return next, err
	}
	next.Seq++
	next.State, next.Proof, next.Reason, next.Controller = Stopped, pr, reason, self
	return next, nil
}

// gone reports whether the controller process p (a revision's writer, a
// launch's launcher) no longer runs: it ran under another boot, or its pid
// now names no process or another one. The calling process itself is
// never gone.
func (s *Store) gone(p Process) (bool, error) {
	boot, err := s.host.BootID()
	if err != nil {
		return false, err
	}
	if p.BootID != boot {
		return true, nil
	}
	alive, err := s.host.Alive(p)
	if err != nil {
		return false, err
	}
	return !alive, nil
}
