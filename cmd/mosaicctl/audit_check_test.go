package main

import (
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/claims"
)

func stored(digest, typ string) storedProof {
	return storedProof{rev: claims.ProofRevision{Record: claims.Record{Proof: &claims.ProofRecord{Type: typ, Digest: digest}}}}
}

// TestAuditCrossCheck: every cohort or boot proof of the claim store must
// be in the journal; a missing one, a suppression, a proof that does not
// verify or an unreadable store is never a clean audit.
func TestAuditCrossCheck(t *testing.T) {
	body := []byte("{}")
	for _, tc := range []struct {
		name      string
		stored    []storedProof
		journaled map[string][]byte
		failed    map[string]bool
		supp      []suppression
		storeErr  error
		code      string // "" = clean
		missing   int
	}{
		{name: "nothing at all"},
		{name: "every proof journaled", stored: []storedProof{stored("a", "cohort"), stored("b", "boot")},
			journaled: map[string][]byte{"a": body, "b": body}},
		{name: "unlaunched proofs are not journaled", stored: []storedProof{stored("u", claims.ProofUnlaunched)}},
		{name: "a withdrawn launch that does not verify", stored: []storedProof{stored("w", claims.ProofWithdrawn)}, code: codeAuditUnverified},
		{name: "a cohort proof missing", stored: []storedProof{stored("a", "cohort"), stored("b", "cohort")},
			journaled: map[string][]byte{"a": body}, code: codeAuditGap, missing: 1},
		{name: "a boot proof missing", stored: []storedProof{stored("b", "boot")}, code: codeAuditGap, missing: 1},
		{name: "suppressed", stored: []storedProof{stored("a", "cohort")}, journaled: map[string][]byte{"a": body},
			supp: []suppression{{dropped: 3, unit: "user@1000.service"}}, code: codeAuditSuppressed},
		{name: "gap before suppression", stored: []storedProof{stored("a", "cohort")},
			supp: []suppression{{dropped: 3}}, code: codeAuditGap, missing: 1},
		{name: "journaled copy does not verify", stored: []storedProof{stored("a", "cohort")},
			journaled: map[string][]byte{}, failed: map[string]bool{"a": true}, code: codeAuditUnverified},
		{name: "store unreadable", storeErr: errors.New("EACCES"), code: codeAuditStore},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &auditReport{stored: tc.stored, suppressed: tc.supp, noticesRead: true, storeProblem: tc.storeErr}
			crossCheck(r, tc.journaled, tc.failed)
			if got := r.missing(); got != tc.missing {
				t.Errorf("missing = %d, want %d", got, tc.missing)
			}
			err := r.verdict("pi-x")
			var v *verdict
			switch {
			case tc.code == "" && err != nil:
				t.Fatalf("verdict %v; want a clean audit", err)
			case tc.code != "" && (!errors.As(err, &v) || v.code != tc.code || v.status != exitUnsettled):
				t.Fatalf("verdict %v; want %s, exit %d", err, tc.code, exitUnsettled)
			}
		})
	}
}

// TestAuditPrintsAFailedWithdrawal: a withdrawn or unlaunched record that
// does not verify against its claim revision is printed as failed, with
// why, never as a proof missing from the journal (it is never journaled).
func TestAuditPrintsAFailedWithdrawal(t *testing.T) {
	for _, typ := range []string{claims.ProofWithdrawn, claims.ProofUnlaunched} {
		t.Run(typ, func(t *testing.T) {
			sp := stored("w", typ)
			sp.exempt, sp.err = true, errors.New("withdrawn proof is about another claim revision")
			out := printed(t, func() { printCrossCheck(&auditReport{stored: []storedProof{sp}, noticesRead: true}) })
			if strings.Contains(out, "MISSING") || !strings.Contains(out, "FAILED") || !strings.Contains(out, "another claim revision") {
				t.Fatalf("audit printed %q; want FAILED and why, never MISSING", out)
			}
		})
	}
}

// printed returns what f writes to standard output.
func printed(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	t.Cleanup(func() { os.Stdout = stdout })
	done := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(r)
		done <- b
	}()
	f()
	os.Stdout = stdout
	w.Close()
	return string(<-done)
}

// TestAuditCountsWithdrawnApart: a withdrawn launch in the claim store is
// no cohort proof: the audit's counts name it apart, in the words of
// `status`, and never among the proofs.
func TestAuditCountsWithdrawnApart(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stored []storedProof
		want   []string
	}{
		{name: "a proof and a withdrawn launch", stored: []storedProof{stored("a", "cohort"), stored("w", claims.ProofWithdrawn)},
			want: []string{"claim store: 1 proof(s) and 1 withdrawn launch(es) (no cohort proof) of this conversation",
				"1 proofs in the claim store and 1 withdrawn launch(es) (no cohort proof), 0 missing"}},
		{name: "only a withdrawn launch", stored: []storedProof{stored("w", claims.ProofWithdrawn)},
			want: []string{"claim store: 0 proof(s) and 1 withdrawn launch(es)", "0 proofs in the claim store and 1 withdrawn launch(es)"}},
		{name: "no withdrawn launch", stored: []storedProof{stored("a", "cohort")},
			want: []string{"claim store: 1 proof(s) of this conversation", "1 proofs in the claim store, 0 missing"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &auditReport{stored: tc.stored, noticesRead: true}
			crossCheck(r, map[string][]byte{"a": []byte("{}")}, nil)
			out := printed(t, func() { printCrossCheck(r) })
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("audit printed\n%s\nwant %q", out, w)
				}
			}
		})
	}
}
