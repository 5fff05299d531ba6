package controller

import (
	"fmt"

	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/proofs"
)

// auditBootProof journals the boot proof a restart found or wrote (the
// recorded boot ended, so the engine cannot be running): like a cohort
// proof it is a decision that frees the claim, and `mosaicctl audit`
// expects every cohort and boot proof of the claim store in the journal.
// It is journaled at every start that finds it, so one a crash kept out of
// the journal is journaled by the next start.
func (c *Controller) auditBootProof(rec claims.Record) {
	p := rec.Proof
	if p == nil || p.Type != proofs.TypeBoot {
		return
	}
	c.audit(audit.Proof, nil, fmt.Sprintf("boot proof %s for execution %s: its recorded boot ended", p.Digest, rec.Execution),
		map[string]string{"PROOF_DIGEST": p.Digest, "PROOF_TYPE": p.Type, "PROOF": string(p.Body), "EXECUTION": rec.Execution})
}
