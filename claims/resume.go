package claims

import (
	"context"
	"errors"

	"github.com/mosaic-agents/mosaic/protocol"
)

// Resume starts a new execution on a claim that stopped with a verified
// proof (W8): a new revision, reserved, generation +1, same conversation,
// branch and leaf. The request must carry the recorded harness,
// conversation, branch, leaf and pins; any difference refuses (target or
// engine-pin-mismatch) and leaves the claim unchanged (W9). Resume only
// records eligibility to launch; the launcher then calls Activate.
func (s *Store) Resume(ctx context.Context, req Request) (*Claim, error) {
	if err := req.validate(); err != nil {
		return nil, protocol.Wrap(protocol.CodeClaimState, err, "resume")
	}
	v, err := s.load(ctx, req.Keys)
	if err != nil {
		return nil, refuseLoad(err)
	}
	cur := v.seat.current()
	switch {
	case cur == nil:
		return nil, protocol.Refuse(protocol.CodeStopProof, "no claim to resume for this seat")
	case cur.Session != req.Keys.Session:
		return nil, protocol.Refuse(protocol.CodeTarget, "the seat's claim is for another session")
	case !free(cur):
		return nil, refuseHeld("seat", cur)
	case cur.Harness != req.Harness || cur.Conversation != req.Conversation:
		return nil, protocol.Refuse(protocol.CodeTarget, "claim %s is for %s conversation %q", cur.Claim, cur.Harness, cur.Conversation)
	case cur.Branch != req.Branch || cur.Leaf != req.Leaf:
		return nil, protocol.Refuse(protocol.CodeTarget, "claim %s stopped at branch %q leaf %q, not %q %q",
			cur.Claim, cur.Branch, cur.Leaf, req.Branch, req.Leaf)
	case cur.Pins != req.Pins:
		return nil, protocol.Refuse(protocol.CodePinMismatch, "claim %s pins %+v differ from %+v", cur.Claim, cur.Pins, req.Pins)
	}
	if sc := v.session.current(); !free(sc) {
		return nil, refuseHeld("session", sc)
	}
	c := &Claim{s: s, keys: req.Keys, rec: *cur}
	err = c.advance(ctx, "resume", []State{Stopped}, func(r *Record) error {
		r.State, r.Proof, r.Engine, r.Launcher, r.Reason = Reserved, nil, nil, nil, "resume"
		r.Generation++
		r.Binding, r.Execution = req.Binding, req.Execution
		return nil
	})
	if err != nil {
		if c.rec.State == Reserved && c.rec.Engine == nil {
			// The seat key took the new execution but the session key did
			// not: give the seat key back rather than leave a partial claim.
			if uerr := c.Abandon(ctx, "resume did not complete"); uerr != nil {
				return nil, errors.Join(err, uerr)
			}
		}
		return nil, err
	}
	return c, nil
}
