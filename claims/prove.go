package claims

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/mosaic-agents/mosaic/proofs"
)

// ProofUnlaunched is the proof type of a reservation released before any
// engine was released to run. It holds because the launcher writes
// `active` (with the incarnation) before it lets the held child exec the
// engine: a claim still `reserved` never ran an engine.
const ProofUnlaunched = "unlaunched"

// unlaunchedProof is the body of a ProofUnlaunched proof record.
type unlaunchedProof struct {
	Type      string `json:"type"`
	Claim     string `json:"claim"`
	Seq       uint64 `json:"seq"` // the reserved revision it releases
	Execution string `json:"execution"`
	Reason    string `json:"reason"`
}

func newUnlaunchedRecord(rec *Record, reason string) (*ProofRecord, error) {
	body, err := proofs.Canonical(unlaunchedProof{
		Type: ProofUnlaunched, Claim: rec.Claim, Seq: rec.Seq, Execution: rec.Execution, Reason: reason,
	})
	if err != nil {
		return nil, err
	}
	return &ProofRecord{Type: ProofUnlaunched, Digest: sum(body), Body: body}, nil
}

func newProofRecord(p proofs.Proof) (*ProofRecord, error) {
	body, err := proofs.Encode(p)
	if err != nil {
		return nil, err
	}
	return &ProofRecord{Type: p.ProofType(), Digest: p.ProofDigest(), Body: body}, nil
}

// proven returns nil only if rec is `stopped` with a proof that verifies
// and is about rec's own execution. A `stopped` revision that fails this
// is "stopped without proof": it frees nothing (W3).
func proven(rec *Record) error {
	if rec == nil || rec.State != Stopped || rec.Proof == nil {
		return fmt.Errorf("no stop proof: %w", proofs.ErrMalformed)
	}
	pr := rec.Proof
	if pr.Type == ProofUnlaunched {
		var u unlaunchedProof
		dec := json.NewDecoder(bytes.NewReader(pr.Body))
		dec.DisallowUnknownFields()
		switch {
		case dec.Decode(&u) != nil:
			return fmt.Errorf("unlaunched proof undecodable: %w", proofs.ErrMalformed)
		case sum(pr.Body) != pr.Digest:
			return fmt.Errorf("unlaunched proof: %w", proofs.ErrDigest)
		case rec.Engine != nil || rec.Launcher != nil:
			return fmt.Errorf("unlaunched proof on a claim whose launch began: %w", proofs.ErrMalformed)
		case u.Type != ProofUnlaunched || u.Claim != rec.Claim || u.Seq+1 != rec.Seq || u.Execution != rec.Execution:
			return fmt.Errorf("unlaunched proof is about another claim revision: %w", proofs.ErrMalformed)
		}
		return nil
	}
	if pr.Type == ProofWithdrawn {
		return provenWithdrawn(rec)
	}
	p, rep, err := proofs.VerifyBytes(pr.Body)
	if err != nil {
		return err
	}
	if !rep.OK() {
		return rep.Err()
	}
	if p.ProofType() != pr.Type || p.ProofDigest() != pr.Digest {
		return fmt.Errorf("proof reference %s %s does not name the stored proof: %w", pr.Type, pr.Digest, proofs.ErrDigest)
	}
	return bindProof(rec, p)
}

// bindProof checks that a verified proof is about rec's execution. An
// engine recorded without a cgroup (the process-group fallback) can never
// be bound by a cohort proof: only a boot proof frees it.
func bindProof(rec *Record, p proofs.Proof) error {
	e := rec.Engine
	if e == nil && rec.Launcher != nil {
		// The launch began but its incarnation was never recorded: bind to
		// the execution and the boot the launching controller ran in; the
		// scope unit is named after conversation and execution.
		e = &Process{BootID: rec.Launcher.BootID, Cgroup: "*"}
	}
	if e == nil {
		return fmt.Errorf("claim %s has no engine incarnation to prove stopped: %w", rec.Claim, proofs.ErrMalformed)
	}
	switch q := p.(type) {
	case *proofs.CohortProof:
		if e.Cgroup == "*" {
			e = &Process{BootID: e.BootID, Cgroup: q.Cgroup}
		}
		if e.Cgroup == "" {
			return fmt.Errorf("engine ran without a scope cgroup: %w", proofs.ErrProcessGroup)
		}
		if q.Conversation != rec.Conversation || q.Execution != rec.Execution || q.BootID != e.BootID || q.Cgroup != e.Cgroup {
			return fmt.Errorf("cohort proof for %s/%s boot %s cgroup %s is not about execution %s/%s boot %s cgroup %s: %w",
				q.Conversation, q.Execution, q.BootID, q.Cgroup, rec.Conversation, rec.Execution, e.BootID, e.Cgroup, proofs.ErrMalformed)
		}
		if e.CgroupID != 0 && q.CgroupID != e.CgroupID {
			return fmt.Errorf("cohort proof names cgroup id %d, execution %s ran in cgroup id %d: %w",
				q.CgroupID, rec.Execution, e.CgroupID, proofs.ErrMalformed)
		}
	case *proofs.BootProof:
		if q.Conversation != rec.Conversation || q.Execution != rec.Execution || q.RecordedBootID != e.BootID {
			return fmt.Errorf("boot proof for %s/%s boot %s is not about execution %s/%s boot %s: %w",
				q.Conversation, q.Execution, q.RecordedBootID, rec.Conversation, rec.Execution, e.BootID, proofs.ErrMalformed)
		}
	default:
		return fmt.Errorf("proof %T: %w", p, proofs.ErrUnknownType)
	}
	return nil
}

// free reports whether a key whose current revision is rec may be taken.
func free(rec *Record) bool { return rec == nil || proven(rec) == nil }
