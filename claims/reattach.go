package claims

import (
	"context"
	"fmt"

	"github.com/mosaic-agents/mosaic/protocol"
)

// Reattach takes over an active claim whose engine still runs and which a
// restarted controller talks to again through the descriptors its
// predecessor kept (the service manager's fd store). It is the one
// takeover that keeps the claim as it was: state active, same execution
// and generation, the engine incarnation unchanged; only the controller
// that wrote the revision is new. Everything must hold or nothing is
// written: the recorded claim is active (a stopping or uncertain claim
// goes through Recover, which never re-attaches), for execution, its
// engine is engine (the caller proved it alive through a pidfd), and
// Classify finds the engine alive with its controller gone. A refusal
// (claim-state) leaves the claim for Recover.
//
// Why not Recover then a transition back to active: Recover records
// uncertain first, and a crash between the two would leave an engine
// that talks to a controller behind a claim that says nobody vouches for
// it.
func (s *Store) Reattach(ctx context.Context, keys Keys, execution string, engine Process) (*Claim, error) {
	if err := keys.validate(); err != nil {
		return nil, protocol.Wrap(protocol.CodeClaimState, err, "reattach")
	}
	v, err := s.load(ctx, keys)
	if err != nil {
		return nil, refuseLoad(err)
	}
	cur := v.seat.current()
	switch {
	case cur == nil:
		return nil, protocol.Refuse(protocol.CodeClaimState, "reattach: no claim for this seat")
	case cur.Session != keys.Session:
		return nil, protocol.Refuse(protocol.CodeClaimState, "reattach: the seat's claim is for another session")
	case cur.State != Active:
		return nil, protocol.Refuse(protocol.CodeClaimState, "reattach: claim %s is %s, not active", cur.Claim, cur.State)
	case cur.Execution != execution:
		return nil, protocol.Refuse(protocol.CodeClaimState, "reattach: claim %s records execution %s, not %s", cur.Claim, cur.Execution, execution)
	case cur.Engine == nil || !sameIncarnation(*cur.Engine, engine):
		return nil, protocol.Refuse(protocol.CodeClaimState, "reattach: claim %s records engine %+v, not %+v", cur.Claim, cur.Engine, engine)
	}
	verdict, err := Classify(cur, s.host)
	if err != nil {
		return nil, protocol.Wrap(protocol.CodeUnsafeReplacement, err, "reattach: classify claim %s", cur.Claim)
	}
	switch verdict {
	case VerdictHeld:
		return nil, refuseHeld("seat", cur)
	case VerdictEngineAlive:
	default:
		return nil, protocol.Refuse(protocol.CodeClaimState, "reattach: claim %s classifies %s, not %s", cur.Claim, verdict, VerdictEngineAlive)
	}
	c := &Claim{s: s, keys: keys, rec: *cur}
	err = c.advance(ctx, "reattach", []State{Active}, func(r *Record) error {
		if r.Execution != execution || r.Engine == nil || !sameIncarnation(*r.Engine, engine) {
			return fmt.Errorf("reattach: claim %s changed while it was checked", r.Claim)
		}
		c.handed, c.handedSaid = cur.Vouched, cur.Announced // the revision taken over; this one drops them
		r.Reason = "controller restarted; re-attached to the running engine through the kept descriptors"
		return nil
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// sameIncarnation compares the identity of an engine process.
func sameIncarnation(a, b Process) bool {
	return a.BootID == b.BootID && a.PID == b.PID && a.StartTime == b.StartTime && a.Cgroup == b.Cgroup
}
