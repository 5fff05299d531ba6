package main

import (
	"fmt"
	"sort"

	"github.com/mosaic-agents/mosaic/claims"
)

// Exit codes of `mosaicctl audit` (exit 4, done but not as asked: the
// audit ran and the trail is not what it should be), in the order the
// first one found is reported.
const (
	codeAuditUnverified = "audit-unverified" // a journaled proof does not verify
	codeAuditGap        = "audit-gap"        // a proof in the claim store is missing from the journal
	codeAuditSuppressed = "audit-suppressed" // journald dropped messages while the conversation logged
	codeAuditStore      = "audit-store"      // part of the claim store could not be read
)

// storedProof is the cross-check of one proof of the claim store.
type storedProof struct {
	rev claims.ProofRevision
	// journaled: an entry of the controller names its digest.
	journaled bool
	// verified: the journaled body, or the store's when the entry left it
	// out as too large, verified and has that digest.
	verified bool
	err      error
	// exempt: an unlaunched proof (no engine ever ran), which any reader
	// of the store may write while settling keys; it is not journaled.
	exempt bool
	// withdrawn describes a withdrawn launch (claims.ProofWithdrawn): no
	// cohort proof, journaled as a transition, not a proof; "" otherwise.
	withdrawn string
}

// auditReport is what the audit found.
type auditReport struct {
	entries      int
	journaled    int // proof entries in the journal
	failed       int // proof entries in the journal that do not verify
	stored       []storedProof
	onlyJournal  []string // digests journaled that the store does not hold
	suppressed   []suppression
	noticesRead  bool
	storeProblem error
}

// crossCheck matches every proof of the claim store against the journal's
// proof entries (failedDigests: those that did not verify there).
func crossCheck(r *auditReport, journaled map[string][]byte, failedDigests map[string]bool) {
	inStore := map[string]bool{}
	for i := range r.stored {
		sp := &r.stored[i]
		pr := sp.rev.Proof
		inStore[pr.Digest] = true
		if pr.Type == claims.ProofUnlaunched {
			sp.exempt = true
			continue
		}
		if pr.Type == claims.ProofWithdrawn {
			// Re-checked against its revision when the store was read;
			// what it rests on is said, never "verified" as a cohort.
			sp.exempt = true
			if sp.withdrawn, sp.err = claims.WithdrawnSummary(pr); sp.err == nil {
				sp.err = claims.Proven(&sp.rev.Record)
			}
			continue
		}
		body, ok := journaled[pr.Digest]
		sp.journaled = ok || failedDigests[pr.Digest]
		switch {
		case failedDigests[pr.Digest]:
			sp.err = fmt.Errorf("the journaled copy does not verify")
		case !ok:
		case body == nil: // left out of the entry as too large
			sp.err = checkJournaledProof(pr.Body, pr.Digest)
			sp.verified = sp.err == nil
		default:
			sp.verified = true
		}
	}
	for d := range journaled {
		if !inStore[d] {
			r.onlyJournal = append(r.onlyJournal, d)
		}
	}
	sort.Strings(r.onlyJournal)
}

// storedKinds counts the store's records of the conversation: proofs
// (cohort, boot, unlaunched) and withdrawn launches, which are no proof
// that anything ended and are never counted as one.
func (r *auditReport) storedKinds() (nproofs, withdrawn int) {
	for _, sp := range r.stored {
		if sp.rev.Proof != nil && sp.rev.Proof.Type == claims.ProofWithdrawn {
			withdrawn++
		} else {
			nproofs++
		}
	}
	return nproofs, withdrawn
}

// missing counts the store's proofs absent from the journal.
func (r *auditReport) missing() int {
	n := 0
	for _, sp := range r.stored {
		if !sp.exempt && !sp.journaled {
			n++
		}
	}
	return n
}

func (r *auditReport) dropped() int {
	n := 0
	for _, s := range r.suppressed {
		n += s.dropped
	}
	return n
}

// verdict is the audit's exit: nil when every proof of the store is in
// the journal and verifies and journald dropped nothing.
func (r *auditReport) verdict(id string) error {
	unverified := 0
	for _, sp := range r.stored {
		if sp.err != nil {
			unverified++
		}
	}
	unverified = max(unverified, r.failed)
	switch {
	case unverified > 0:
		return unsettled(codeAuditUnverified, "%d proof(s) in the journal do not verify", unverified)
	case r.missing() > 0:
		return unsettled(codeAuditGap, "%d proof(s) in the claim store are missing from the journal of %s: the journal lost decisions; the claim store holds the proofs (`mosaicctl status %s`)", r.missing(), id, id)
	case len(r.suppressed) > 0:
		return unsettled(codeAuditSuppressed, "journald suppressed %d message(s) of this user's units in %d interval(s) since the conversation began: entries of %s may be missing", r.dropped(), len(r.suppressed), id)
	case r.storeProblem != nil:
		return unsettled(codeAuditStore, "part of the claim store could not be read, so not every proof was cross-checked: %v", r.storeProblem)
	}
	return nil
}
