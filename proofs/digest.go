package proofs

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// Proof is a cohort or boot proof.
type Proof interface {
	// ProofType is the `type` field: TypeCohort or TypeBoot.
	ProofType() string
	// ProofDigest is the recorded digest field.
	ProofDigest() string
}

func (p *CohortProof) ProofType() string   { return TypeCohort }
func (p *CohortProof) ProofDigest() string { return p.Digest }
func (p *BootProof) ProofType() string     { return TypeBoot }
func (p *BootProof) ProofDigest() string   { return p.Digest }

// Digest returns the lowercase hex SHA-256 of the canonical JSON of p
// without its digest field: the value the digest field must hold.
func Digest(p Proof) (string, error) { return digest(p) }

// Encode returns the canonical JSON of p with its digest, the form a proof
// is stored and journaled in.
func Encode(p Proof) ([]byte, error) { return Canonical(p) }

func digest(p Proof) (string, error) {
	var v any
	switch q := p.(type) {
	case *CohortProof:
		c := *q
		c.Digest = ""
		v = &c
	case *BootProof:
		c := *q
		c.Digest = ""
		v = &c
	default:
		return "", fmt.Errorf("digest of %T: %w", p, ErrUnknownType)
	}
	b, err := Canonical(v)
	if err != nil {
		return "", fmt.Errorf("digest: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}
