package proofs

import (
	"bytes"
	"encoding/json"

	"fmt"
	"io"
)

// maxProofBytes bounds what VerifyReader reads; a real proof of a
// 10,000-member cohort is well under a megabyte.
const maxProofBytes = 16 << 20

// Verify re-checks p offline: its digest and its internal consistency. It
// never reads the host. The report lists every check; Report.OK says
// whether the proof holds.
func Verify(p Proof) Report {
	var cs checks
	r := Report{}
	switch q := p.(type) {
	case *CohortProof:
		r.Type, r.Digest = TypeCohort, q.Digest
		checkDigest(&cs, q)
		checkCohort(&cs, q)
	case *BootProof:
		r.Type, r.Digest = TypeBoot, q.Digest
		checkDigest(&cs, q)
		checkBoot(&cs, q)
	default:
		cs.add("type", false, ErrUnknownType, "%T is not a proof", p)
	}
	r.Checks = cs
	return r
}

func checkDigest(cs *checks, p Proof) {
	want, err := digest(p)
	switch {
	case err != nil:
		cs.add("digest", false, ErrDigest, "cannot compute: %v", err)
	default:
		cs.add("digest", p.ProofDigest() == want, ErrDigest,
			"recorded %q, sha256 of canonical json %q", p.ProofDigest(), want)
	}
}

// Decode parses one proof, discriminated by its `type` field. It refuses
// unknown fields, duplicate keys, non-finite numbers and trailing data.
func Decode(raw []byte) (Proof, error) {
	if _, err := CanonicalizeJSON(raw); err != nil {
		return nil, fmt.Errorf("decode proof: %w", err)
	}
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return nil, fmt.Errorf("decode proof: %w", err)
	}
	var p Proof
	switch head.Type {
	case TypeCohort:
		p = new(CohortProof)
	case TypeBoot:
		p = new(BootProof)
	case "unlaunched", "withdrawn":
		// The claim store's records of a launch that never released its
		// engine (claims.ProofUnlaunched, claims.ProofWithdrawn): checked
		// against their claim revision there, never a cohort or boot proof.
		return nil, fmt.Errorf("decode proof: type %q is a claim record of a launch that never released its engine, not a cohort or boot proof (`mosaicctl audit` checks it against its claim revision): %w", head.Type, ErrUnknownType)
	default:
		return nil, fmt.Errorf("decode proof: type %q: %w", head.Type, ErrUnknownType)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(p); err != nil {
		return nil, fmt.Errorf("decode %s proof: %w", head.Type, err)
	}
	return p, nil
}

// VerifyBytes decodes and verifies one proof. Beyond Verify it checks that
// the bytes hold exactly the fields of the proof, none missing (a missing
// `populated` must not read as 0). The error is non-nil when the bytes are
// not a proof at all; a proof that does not hold gives a report that is
// not OK and a nil error.
func VerifyBytes(raw []byte) (Proof, Report, error) {
	p, err := Decode(raw)
	if err != nil {
		return nil, Report{}, err
	}
	r := Verify(p)
	canonRaw, _ := CanonicalizeJSON(raw) // Decode already accepted it
	canonP, err := Canonical(p)
	ok := err == nil && bytes.Equal(canonRaw, canonP)
	r.Checks = append([]Check{{Name: "fields", OK: ok, err: ErrMalformed,
		Detail: "every field present, none unknown, no null for a list"}}, r.Checks...)
	return p, r, nil
}

// VerifyReader reads one proof (cohort or boot) from r, verifies it and
// prints every check to w, one per line. It returns nil only if the proof
// holds. Once the bytes are read, every failure is a *VerifyError: bytes
// that are not a proof at all (Proof nil, Err says why), or a proof whose
// checks failed (Report holds them; Err joins them). Any other error is
// the reading's.
func VerifyReader(r io.Reader, w io.Writer) error {
	raw, err := io.ReadAll(io.LimitReader(r, maxProofBytes+1))
	if err != nil {
		return fmt.Errorf("read proof: %w", err)
	}
	if len(raw) > maxProofBytes {
		return &VerifyError{Err: fmt.Errorf("read proof: larger than %d bytes: %w", maxProofBytes, ErrMalformed)}
	}
	p, rep, err := VerifyBytes(raw)
	if err != nil {
		fmt.Fprintf(w, "FAIL  decode  %v\n", err)
		return &VerifyError{Err: err}
	}
	if err := Print(w, rep); err != nil {
		return err
	}
	if err := rep.Err(); err != nil {
		return &VerifyError{Proof: p, Report: rep, Err: err}
	}
	return nil
}

// VerifyError is VerifyReader's verdict on bytes it read: not a proof
// (Proof nil), or a proof that does not hold (Report lists the checks).
type VerifyError struct {
	Proof  Proof
	Report Report
	Err    error
}

func (e *VerifyError) Error() string { return e.Err.Error() }
func (e *VerifyError) Unwrap() error { return e.Err }

// Failed names the checks that failed, in order.
func (r Report) Failed() []string {
	var names []string
	for _, c := range r.Checks {
		if !c.OK {
			names = append(names, c.Name)
		}
	}
	return names
}

// Print writes a report as text: a header line, one line per check, and a
// verdict line.
func Print(w io.Writer, rep Report) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "proof %s digest %s\n", rep.Type, rep.Digest)
	failed := 0
	for _, c := range rep.Checks {
		mark := "ok  "
		if !c.OK {
			mark = "FAIL"
			failed++
		}
		fmt.Fprintf(&b, "%s  %-22s %s\n", mark, c.Name, c.Detail)
	}
	if rep.OK() {
		fmt.Fprintf(&b, "verified: all %d checks passed\n", len(rep.Checks))
	} else {
		fmt.Fprintf(&b, "NOT verified: %d of %d checks failed\n", failed, len(rep.Checks))
	}
	_, err := w.Write(b.Bytes())
	if err != nil {
		return fmt.Errorf("print report: %w", err)
	}
	return nil
}
