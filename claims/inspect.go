package claims

import "context"

// Status is what holds a pair of keys right now.
type Status struct {
	// Seat and Session are the current revisions under each key, nil for a
	// key never claimed. After settling they name the same claim unless
	// one key's claim is stopped with a proof.
	Seat, Session *Record
	// Free is true when both keys may be acquired.
	Free bool
}

// Current settles and reads both keys. A corrupt key is an error carrying
// ErrCorrupt, never a free status.
func (s *Store) Current(ctx context.Context, keys Keys) (Status, error) {
	v, err := s.load(ctx, keys)
	if err != nil {
		return Status{}, refuseLoad(err)
	}
	st := Status{Seat: v.seat.current(), Session: v.session.current()}
	st.Free = free(st.Seat) && free(st.Session)
	return st, nil
}

// Proven reports whether rec is stopped with a proof that verifies and is
// about rec's own execution, and if not, why.
func Proven(rec *Record) error { return proven(rec) }
