package claims

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/mosaic-agents/mosaic/proofs"
	"github.com/mosaic-agents/mosaic/protocol"
)

// Claim is a held claim: the handle its controller transitions it with.
// There is deliberately no method that frees a claim without a proof:
// disconnect, agent_settled, EOF, SIGTERM, idle and an abort reply have
// nothing to call.
//
// Transitions must be made one at a time; Record may be called from any
// goroutine while one runs (a status read must not wait for a store write).
type Claim struct {
	s    *Store
	keys Keys
	mu   sync.Mutex // guards rec's writes against Record; transitions read it bare
	rec  Record     // the latest revision this handle wrote or read
	// handed is the Vouched of the active revision Reattach took over
	// (Handover), guarded by mu.
	handed     *FileState
	handedSaid []Announcement // and its Announced
}

// Record returns the claim's latest revision as this handle knows it.
func (c *Claim) Record() Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rec
}

// set makes r the handle's latest revision.
func (c *Claim) set(r Record) {
	c.mu.Lock()
	c.rec = r
	c.mu.Unlock()
}

// Keys returns the claim's keys.
func (c *Claim) Keys() Keys { return c.keys }

// BeginLaunch marks a reservation as launching. The controller calls it
// before it asks the launcher to start the engine; a reservation marked
// so is never released as unlaunched, because the launcher may have
// released the engine before the controller recorded the incarnation. A
// crash after BeginLaunch leaves the claim to Recover as uncertain until a
// cohort proof for the execution's scope (or a boot proof) frees it.
func (c *Claim) BeginLaunch(ctx context.Context) error {
	return c.advance(ctx, "begin launch", []State{Reserved}, func(r *Record) error {
		if r.Launcher != nil {
			return errState(r, "begin launch twice")
		}
		launcher := r.Controller
		r.Launcher = &launcher
		return nil
	})
}

// Activate records the engine incarnation: reserved -> active. A process-group fallback passes an empty
// Cgroup, and its claim can then never be stopped by a cohort proof.
func (c *Claim) Activate(ctx context.Context, engine Process) error {
	if !proofs.ValidBootID(engine.BootID) || engine.PID <= 0 || engine.StartTime == 0 {
		return protocol.Wrap(protocol.CodeClaimState, ErrInvalid, "engine incarnation %+v incomplete", engine)
	}
	return c.advance(ctx, "activate", []State{Reserved}, func(r *Record) error {
		r.State, r.Engine, r.Reason = Active, &engine, ""
		return nil
	})
}

// BeginStop records that a stop is in progress: active or uncertain ->
// stopping (a retried escalation starts from uncertain).
func (c *Claim) BeginStop(ctx context.Context, reason string) error {
	return c.advance(ctx, "begin stop", []State{Active, Uncertain}, func(r *Record) error {
		if r.Engine == nil && r.Launcher == nil {
			return errState(r, "begin stop without a launch")
		}
		r.State, r.Reason = Stopping, reason
		return nil
	})
}

// MarkUncertain records that the engine may be alive and nothing may
// replace it: from reserved, active or stopping. Already uncertain is a
// no-op.
func (c *Claim) MarkUncertain(ctx context.Context, reason string) error {
	if c.rec.State == Uncertain {
		return nil
	}
	return c.advance(ctx, "mark uncertain", []State{Reserved, Active, Stopping}, func(r *Record) error {
		r.State, r.Reason = Uncertain, reason
		return nil
	})
}

// Stop records `stopped` with p, which must verify offline and be about
// this claim's execution (same conversation, execution, boot id, cgroup
// and, when recorded, cgroup id). Anything less is refused stop-proof and
// the claim is unchanged. A Stop whose write failed (claim-store: the
// store full, read-only) may be called again with the same proof until it
// succeeds, whatever step the failed write reached.
func (c *Claim) Stop(ctx context.Context, p proofs.Proof) error {
	return c.StopVouched(ctx, p, "", nil)
}

// StopVouched is Stop that also records written, the header id of the
// session file the controller saw the execution write (Record.Written;
// "" keeps what the claim recorded before), and vouched, what that file
// held as the controller last vouched for it (Record.Vouched; nil
// records nothing).
func (c *Claim) StopVouched(ctx context.Context, p proofs.Proof, written string, vouched *FileState) error {
	return c.stopWith(ctx, p, "stop", []State{Active, Stopping, Uncertain}, func(r *Record) {
		r.Reason = ""
		keepWritten(r, written)
		r.Vouched = vouched
	})
}

// keepWritten records written on r unless it is empty: evidence of a
// session file is never dropped by a revision that did not see it.
func keepWritten(r *Record, written string) {
	if written != "" {
		r.Written = written
	}
}

// stopWith records stopped with proof p from one of the states from, with
// what mark adds to the revision; a retry with the same proof completes a
// write that failed part way.
func (c *Claim) stopWith(ctx context.Context, p proofs.Proof, op string, from []State, mark func(*Record)) error {
	if p == nil {
		return protocol.Refuse(protocol.CodeStopProof, "stopped needs a proof")
	}
	pr, err := newProofRecord(p)
	if err != nil {
		return protocol.Wrap(protocol.CodeStopProof, err, "encode proof")
	}
	if c.rec.State == Stopped && c.rec.Proof != nil && c.rec.Proof.Digest == pr.Digest {
		return c.finishStop(ctx, pr)
	}
	return c.advance(ctx, op, from, func(r *Record) error {
		r.State, r.Proof = Stopped, pr
		mark(r)
		if err := proven(r); err != nil {
			return protocol.Wrap(protocol.CodeStopProof, err, "proof %s %s does not prove execution %s stopped",
				pr.Type, pr.Digest, r.Execution)
		}
		return nil
	})
}

// Conclude ends a stop from the kill phase's observation: with a cohort
// proof built from obs the claim becomes stopped; if no proof can be built
// the claim becomes uncertain with the reason and the error (joined
// proofs.Err* values) is returned. It never reaches stopped on a partial
// observation.
func (c *Claim) Conclude(ctx context.Context, obs proofs.Observation) error {
	p, err := proofs.NewCohortProof(obs)
	if err != nil {
		if uerr := c.MarkUncertain(ctx, err.Error()); uerr != nil {
			return errors.Join(err, uerr)
		}
		return err
	}
	return c.Stop(ctx, p)
}

// Abandon releases a reservation whose launch never began: reserved (no
// BeginLaunch) -> stopped with an unlaunched proof. After BeginLaunch a
// failed launch is MarkUncertain plus a proof, never Abandon.
func (c *Claim) Abandon(ctx context.Context, reason string) error {
	return c.advance(ctx, "abandon", []State{Reserved}, func(r *Record) error {
		if r.Engine != nil || r.Launcher != nil {
			return errState(r, "abandon after the launch began")
		}
		pr, err := newUnlaunchedRecord(c.prev(r), reason)
		if err != nil {
			return err
		}
		r.State, r.Proof, r.Reason = Stopped, pr, reason
		return nil
	})
}

// advance writes the claim's next revision: seat key first, then session
// key. Any writer that raced it makes it refuse stale-generation.
func (c *Claim) advance(ctx context.Context, op string, from []State, mutate func(*Record) error) error {
	s := c.s
	v, err := s.load(ctx, c.keys)
	if err != nil {
		return refuseLoad(err)
	}
	cur := v.seat.current()
	if cur == nil || cur.Claim != c.rec.Claim || cur.Seq != c.rec.Seq {
		return protocol.Wrap(protocol.CodeStaleGeneration, ErrStale, "%s: claim %s seq %d is no longer current", op, c.rec.Claim, c.rec.Seq)
	}
	if !slices.Contains(from, cur.State) {
		return errState(cur, op)
	}
	self, err := s.host.Self()
	if err != nil {
		return protocol.Wrap(protocol.CodeClaimStore, err, "%s: identify controller", op)
	}
	next := *cur
	next.Seq++
	next.Controller = self
	next.Policy = ""   // only the transition that sets it keeps it
	next.Vouched = nil // likewise: it is about the execution that stopped
	next.Announced = nil
	if err := mutate(&next); err != nil {
		return err
	}
	return c.write(ctx, v, op, cur, next)
}

// write publishes next under both keys. The session key must hold the
// claim's current revision, or be free, or (for a release of a
// reservation that never reached it) be left alone.
func (c *Claim) write(ctx context.Context, v *view, op string, cur *Record, next Record) error {
	s := c.s
	sc := v.session.current()
	toSession := true
	switch {
	case sc != nil && sc.Claim == cur.Claim && sc.Seq == cur.Seq:
	case next.State == Stopped && next.Engine == nil && next.Launcher == nil && (sc == nil || sc.Claim != cur.Claim):
		toSession = false
	case free(sc):
	default:
		return refuseHeld("session", sc)
	}
	next.KeyKind, next.Revision = kindSeat, v.seat.next()
	if err := s.publish(v.seat.dir, next); err != nil {
		c.resync(ctx)
		return refuseWrite(err, "%s: write seat key of claim %s", op, cur.Claim)
	}
	c.set(next)
	if !toSession {
		return nil
	}
	if err := s.fault(FaultBetweenKeys, v.session.dir); err != nil {
		return refuseWrite(err, "%s: write session key of claim %s", op, cur.Claim)
	}
	next.KeyKind, next.Revision = kindSession, v.session.next()
	err := s.publish(v.session.dir, next)
	if errors.Is(err, ErrRevisionExists) {
		// A settler may have copied this very revision across already.
		if sl, rerr := readSlot(v.session.dir, kindSession); rerr == nil {
			if got := sl.current(); got != nil && sameRevision(*got, next) {
				return nil
			}
		}
	}
	if err != nil {
		return refuseWrite(err, "%s: write session key of claim %s (seat key written; the next read completes it)", op, cur.Claim)
	}
	return nil
}

// resync reloads the handle's record after a failed write that may have
// landed (an error after the link, such as a failed directory fsync).
func (c *Claim) resync(ctx context.Context) {
	v, err := c.s.load(ctx, c.keys)
	if err != nil {
		return
	}
	if cur := v.seat.current(); cur != nil && cur.Claim == c.rec.Claim {
		c.set(*cur)
	}
}

func (c *Claim) String() string {
	return fmt.Sprintf("claim %s seq %d %s", c.rec.Claim, c.rec.Seq, c.rec.State)
}

// finishStop completes a Stop retried after a write that failed part way:
// the seat key already holds this claim stopped with pr (the session key
// may lag). Reading the keys settles the session key, itself a write that
// can fail again (the store still full): then the error is returned and
// the caller retries once more.
func (c *Claim) finishStop(ctx context.Context, pr *ProofRecord) error {
	v, err := c.s.load(ctx, c.keys)
	if err != nil {
		return refuseLoad(err)
	}
	cur := v.seat.current()
	if cur == nil || cur.Claim != c.rec.Claim || cur.State != Stopped || cur.Proof == nil || cur.Proof.Digest != pr.Digest {
		return protocol.Wrap(protocol.CodeStaleGeneration, ErrStale, "stop: claim %s no longer holds proof %s", c.rec.Claim, pr.Digest)
	}
	c.set(*cur)
	return nil
}
