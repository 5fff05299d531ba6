package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/proofs"
	"github.com/mosaic-agents/mosaic/protocol"
)

// pendingStop is a cohort proof the claim store refused to record (full,
// read-only, I/O error): the cohort is proven gone, the claim is not yet
// stopped. The proof is kept in memory and journaled, and written again
// with backoff until it lands; no process is signalled again for it.
type pendingStop struct {
	proof *proofs.CohortProof
	body  []byte
	stop  *protocol.Stop
	x     *execution
	err   error // the last refusal of the store
}

// recordRetryMax bounds the backoff between attempts to write a pending
// stopped revision (Config.RecordRetry overrides it).
const recordRetryMax = 5 * time.Second

// retryable reports whether a failed claim write may succeed later
// without anything else changing: the store could not be written.
func retryable(err error) bool { return protocol.CodeOf(err) == protocol.CodeClaimStore }

// recordProof writes the stopped revision for p. It returns the stored
// proof record, or, when the store refused, nil and the error; a refusal
// that is not the store's (the proof is not about this claim, another
// writer) is final.
//
// The revision records what x's session watch last vouched for
// (claims.Record.Vouched), not what the file holds now: the engine is
// gone, so bytes past the last check can no longer be asked about, and
// the wake and a recover compare the file with exactly what was vouched.
func (c *Controller) recordProof(ctx context.Context, x *execution, p *proofs.CohortProof, kind string) (*claims.ProofRecord, error) {
	var rec *claims.ProofRecord
	c.mu.Lock()
	leaf, written, idle := c.st.leaf, c.st.written, c.st.hibernateWhy
	c.mu.Unlock()
	var vouched *claims.FileState
	if x != nil {
		vouched = x.vouched.Load()
	}
	err := c.claimDo(func(cl *claims.Claim) error {
		stop := func() error { return cl.StopVouched(ctx, p, written, vouched) }
		if kind == protocol.KindHibernate {
			// The idle policy's own stop: the one a client's connection
			// may wake without a confirmation (hibernate.go).
			stop = func() error { return cl.Hibernate(ctx, p, idle, leaf, written, vouched) }
		}
		if err := stop(); err != nil {
			return err
		}
		rec = cl.Record().Proof
		return nil
	})
	if err == nil && x != nil && c.cfg.Conversation.IsClaude() {
		// The stop records the bytes: the mark kept for a crash before it
		// (markkeep.go) is no longer needed. Only a Claude execution keeps
		// one (an adopted orphan's too, whose x.mark is nil).
		c.dropKept(x.id, keptMarkRole)
	}
	return rec, err
}

// holdProofLocked keeps a proof the store refused, journals it with the
// refusal, says so on the stop and the binding, and starts the retries.
// The stop stays stopping (not terminal) until the revision is written.
func (c *Controller) holdProofLocked(x *execution, s *protocol.Stop, p *proofs.CohortProof, err error) {
	body, _ := proofs.Encode(p)
	ps := &pendingStop{proof: p, body: body, stop: s, x: x, err: err}
	c.st.pending = ps
	why := fmt.Sprintf("cohort proven gone (proof %s, basis %s), but the claim store refused the stopped revision: %v; "+
		"free space in the claim store or make it writable: the controller writes it again by itself (or run force stop to write it now); nothing is killed again",
		p.Digest, p.Basis, err)
	c.st.binding = protocol.BindingStopping
	c.closeAdmissionLocked(why)
	c.transitionLocked(s, protocol.StopStopping, why)
	c.audit(audit.Transition, nil, fmt.Sprintf("cohort proof %s for execution %s held: the claim store refused it: %v", p.Digest, x.id, err),
		map[string]string{"PROOF_DIGEST": p.Digest, "PROOF_TYPE": p.ProofType(), "PROOF": string(body), "STOP": s.ID,
			"EXECUTION": x.id, "STATE": "stopping", "CLAIM_WRITE": "refused"})
	c.writes.Add(1)
	go c.retryProof(ps)
}

// retryProof writes a held proof again with backoff (from 100 ms,
// doubling, at most Config.RecordRetry) until it is written, refused for
// good, replaced, or the controller closes. A controller that closes
// first leaves the claim stopping or uncertain with the scope gone; the
// next one finishes the stop from the cgroup's removal.
func (c *Controller) retryProof(ps *pendingStop) {
	defer c.writes.Done()
	wait := 100 * time.Millisecond
	limit := c.cfg.RecordRetry
	if limit <= 0 {
		limit = recordRetryMax
	}
	for {
		t := time.NewTimer(wait)
		select {
		case <-c.closing:
			t.Stop()
			return
		case <-t.C:
		}
		run(c.test.beforeRetry)
		if c.writeHeld(context.Background(), ps) {
			return
		}
		wait = min(2*wait, limit)
	}
}

// writeHeld makes one attempt at writing a held proof and records the
// outcome. It reports whether the proof is no longer pending.
func (c *Controller) writeHeld(ctx context.Context, ps *pendingStop) bool {
	c.mu.Lock()
	if c.st.pending != ps {
		c.mu.Unlock()
		return true
	}
	c.mu.Unlock()
	rec, err := c.recordProof(ctx, ps.x, ps.proof, ps.stop.Kind)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.st.pending != ps {
		return true
	}
	switch {
	case err == nil:
		c.st.pending = nil
		c.stoppedLocked(ps.x, ps.stop, rec)
	case retryable(err):
		ps.err = err
		return false
	default:
		c.st.pending = nil
		reason := "the claim refused the held proof " + ps.proof.Digest + ": " + err.Error()
		c.st.binding = protocol.BindingUncertain
		c.closeAdmissionLocked("force stop " + ps.stop.ID + " ended uncertain: " + reason)
		c.transitionLocked(ps.stop, protocol.StopUncertain, reason)
	}
	c.publishBindingLocked()
	return true
}

// stoppedLocked records a stop that the claim now holds as stopped.
func (c *Controller) stoppedLocked(x *execution, s *protocol.Stop, proof *claims.ProofRecord) {
	s.ProofDigest, s.Proof = proof.Digest, proof.Body
	c.st.binding = protocol.BindingStopped
	c.closeAdmissionLocked("stopped with proof " + proof.Digest)
	c.transitionLocked(s, protocol.StopStopped, "cohort proof "+proof.Digest)
	c.audit(audit.Proof, nil, fmt.Sprintf("cohort proof %s for execution %s", proof.Digest, x.id),
		map[string]string{"PROOF_DIGEST": proof.Digest, "PROOF_TYPE": proof.Type, "PROOF": string(proof.Body), "STOP": s.ID, "EXECUTION": x.id})
}

// recordHeld is a force stop while a proof is held: nothing is signalled,
// the held proof is written now, and the receipt says whether it landed.
func (c *Controller) recordHeld(k *conn, cmd *protocol.Command, ps *pendingStop, gen int64) protocol.Receipt {
	c.writeHeld(context.Background(), ps)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopReceipt(k, cmd, ps.stop, gen)
}
