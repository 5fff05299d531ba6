package claims

import (
	"context"
	"fmt"

	"github.com/mosaic-agents/mosaic/proofs"
	"github.com/mosaic-agents/mosaic/protocol"
)

// Verdict is the restart classification of a recorded claim.
type Verdict string

const (
	// VerdictFree: no claim holds these keys.
	VerdictFree Verdict = "free"
	// VerdictStopped: the claim is stopped with a verified proof, already
	// or now (a boot proof for another boot id, W7; an unlaunched proof for
	// a reservation whose controller is gone).
	VerdictStopped Verdict = "stopped"
	// VerdictHeld: a live controller holds the claim; do not touch it.
	VerdictHeld Verdict = "held"
	// VerdictEngineAlive: same boot, the engine still runs with no
	// controller (its stdin is gone). Uncertain; only a confirmed force
	// stop of its cohort moves it on (W6).
	VerdictEngineAlive Verdict = "engine-alive"
	// VerdictObserve: same boot, the engine is gone or a stop was in
	// progress. Uncertain (or still stopping, K10) until a cohort
	// observation shows no member left: call Claim.Conclude or Stop.
	VerdictObserve Verdict = "observe-cohort"
)

// Classify decides what a restarting controller must do with rec, reading
// only the host (boot id, liveness); it writes nothing.
func Classify(rec *Record, h Host) (Verdict, error) {
	if rec == nil {
		return VerdictFree, nil
	}
	if free(rec) {
		return VerdictStopped, nil
	}
	boot, err := h.BootID()
	if err != nil {
		return "", err
	}
	ctl := rec.Controller
	if ctl.BootID == boot {
		alive, err := h.Alive(ctl)
		if err != nil {
			return "", err
		}
		if alive {
			return VerdictHeld, nil
		}
	}
	e := rec.Engine
	switch {
	case e == nil && rec.Launcher != nil && rec.Launcher.BootID != boot:
		return VerdictStopped, nil // launched, if at all, in a boot that ended
	case e == nil && rec.Launcher != nil:
		return VerdictObserve, nil // an engine may run in the execution's scope
	case e == nil && rec.State == Stopped:
		return VerdictObserve, nil // stopped without proof, nothing recorded to observe
	case e == nil:
		return VerdictStopped, nil // a launch that never began
	case e.BootID != boot:
		return VerdictStopped, nil
	}
	alive, err := h.Alive(*e)
	if err != nil {
		return "", err
	}
	if alive && rec.State != Stopping {
		return VerdictEngineAlive, nil
	}
	return VerdictObserve, nil
}

// Recovery is what Recover found and did.
type Recovery struct {
	Verdict Verdict
	// Claim is the claim, taken over by this controller (generation +1),
	// or nil for VerdictFree.
	Claim *Claim
}

// Recover is what a controller runs at start for its keys before it may
// launch anything. It classifies the recorded claim and records the
// outcome as this controller's takeover (generation +1): another boot id
// -> stopped with a boot proof (W7); a reservation whose controller is gone
// -> stopped with an unlaunched proof; same boot with the engine alive ->
// uncertain (W6); same boot, engine gone -> uncertain, or still stopping
// if a stop was in progress (K10), until Claim.Conclude proves the cohort
// empty. It never launches and never frees a key without a proof. A claim
// whose controller is still alive is refused already-active.
func (s *Store) Recover(ctx context.Context, keys Keys) (*Recovery, error) {
	if err := keys.validate(); err != nil {
		return nil, protocol.Wrap(protocol.CodeClaimState, err, "recover")
	}
	v, err := s.load(ctx, keys)
	if err != nil {
		return nil, refuseLoad(err)
	}
	cur := v.seat.current()
	if cur == nil || (free(cur) && cur.Session != keys.Session) {
		if sc := v.session.current(); !free(sc) {
			return nil, refuseHeld("session", sc) // held under another seat (W4)
		}
		return &Recovery{Verdict: VerdictFree}, nil
	}
	if cur.Session != keys.Session {
		return nil, refuseHeld("seat", cur)
	}
	c := &Claim{s: s, keys: keys, rec: *cur}
	verdict, err := Classify(cur, s.host)
	if err != nil {
		return nil, protocol.Wrap(protocol.CodeUnsafeReplacement, err, "classify claim %s", cur.Claim)
	}
	if verdict == VerdictStopped && free(cur) {
		return &Recovery{Verdict: verdict, Claim: c}, nil
	}
	if verdict == VerdictHeld {
		return nil, refuseHeld("seat", cur)
	}
	if err := c.takeOver(ctx, verdict); err != nil {
		return nil, err
	}
	return &Recovery{Verdict: verdict, Claim: c}, nil
}

// takeOver writes this controller's first revision of a recovered claim.
func (c *Claim) takeOver(ctx context.Context, verdict Verdict) error {
	s := c.s
	boot, err := s.host.BootID()
	if err != nil {
		return protocol.Wrap(protocol.CodeClaimStore, err, "recover: read boot id")
	}
	return c.advance(ctx, "recover", []State{Reserved, Active, Stopping, Uncertain, Stopped}, func(r *Record) error {
		r.Generation++
		if c.rec.State == Active {
			c.handed, c.handedSaid = c.rec.Vouched, c.rec.Announced // a Handover's, which this revision drops
		}
		switch {
		case verdict == VerdictStopped && r.Engine == nil && r.Launcher == nil && r.State == Reserved:
			pr, err := newUnlaunchedRecord(c.prev(r), "controller gone before launch")
			if err != nil {
				return err
			}
			r.State, r.Proof, r.Reason = Stopped, pr, "controller gone before launch"
		case verdict == VerdictStopped:
			var recorded string
			switch {
			case r.Engine != nil:
				recorded = r.Engine.BootID
			case r.Launcher != nil: // launch begun, incarnation unrecorded
				recorded = r.Launcher.BootID
			}
			p, err := proofs.NewBootProof(r.Conversation, r.Execution, recorded, boot, s.host.Now())
			if err != nil {
				return protocol.Wrap(protocol.CodeStopProof, err, "recover: boot proof")
			}
			pr, err := newProofRecord(p)
			if err != nil {
				return err
			}
			r.State, r.Proof, r.Reason = Stopped, pr, "recorded boot "+recorded+" ended"
		case r.State == Stopping:
			r.Reason = "controller restarted during a stop; observing the cohort"
		default:
			r.State, r.Proof = Uncertain, nil
			r.Reason = fmt.Sprintf("controller restarted: %s", verdict)
		}
		if r.State == Stopped {
			if err := proven(r); err != nil {
				return protocol.Wrap(protocol.CodeStopProof, err, "recover: proof")
			}
		}
		return nil
	})
}

// prev returns the record as it was before advance bumped its seq, which
// an unlaunched proof names.
func (c *Claim) prev(r *Record) *Record {
	p := *r
	p.Seq--
	return &p
}
