package claims

import (
	"context"
	"errors"
	"fmt"

	"github.com/mosaic-agents/mosaic/proofs"
)

// PolicyHibernate marks a stopped revision that the controller made of an
// idle conversation on its own: the idle policy (no run, no client, no
// tool process, nothing queued or pending), or a stop of the controller's
// service that found it so but for its clients; it ended the engine the
// gentle way and proved the cohort empty.
const PolicyHibernate = "hibernate"

// Hibernate records stopped with a cohort proof, as Stop does, for a stop
// of an idle conversation (PolicyHibernate; idle says how it was idle,
// "idle for 5m0s"), and the leaf the conversation was on: the one
// launch without a confirmation (Wakeable) relaunches on exactly that
// leaf; written and vouched are as for StopVouched: the wake relaunches
// only on exactly the vouched bytes, since no engine ran to write any
// other. Like Stop it may be called again with the same proof after a
// failed write.
func (c *Claim) Hibernate(ctx context.Context, p proofs.Proof, idle, leaf, written string, vouched *FileState) error {
	if idle == "" {
		idle = "idle"
	}
	return c.stopWith(ctx, p, "hibernate", []State{Stopping}, func(r *Record) {
		r.Reason, r.Policy = "hibernated: "+idle, PolicyHibernate
		if leaf != "" {
			r.Leaf = leaf
		}
		keepWritten(r, written)
		r.Vouched = vouched
	})
}

// ErrNotWakeable means a stopped claim needs recover (a confirmed launch):
// it was not a proven stop of the idle policy.
var ErrNotWakeable = errors.New("not a proven hibernate")

// Wakeable reports whether rec may be launched again without a
// confirmation: only a stopped revision the idle policy wrote
// (PolicyHibernate) whose proof is a cohort proof that verifies. A force
// stop, a boot proof, an unlaunched proof, anything uncertain: recover.
func Wakeable(rec *Record) error {
	switch {
	case rec == nil:
		return fmt.Errorf("%w: no claim", ErrNotWakeable)
	case rec.State != Stopped || rec.Policy != PolicyHibernate:
		return fmt.Errorf("%w: claim %s is %s (policy %q)", ErrNotWakeable, rec.Claim, rec.State, rec.Policy)
	case rec.Proof == nil || rec.Proof.Type != proofs.TypeCohort:
		return fmt.Errorf("%w: claim %s has no cohort proof", ErrNotWakeable, rec.Claim)
	}
	if err := proven(rec); err != nil {
		return fmt.Errorf("%w: %w", ErrNotWakeable, err)
	}
	return nil
}
