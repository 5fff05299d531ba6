package claims

import (
	"context"
	"testing"
)

// TestProofs: the stopped revisions of a conversation, once each although
// both keys hold a copy, and nothing of another conversation; reading
// writes nothing.
func TestProofs(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	s := openStore(t, root, newHost(100))
	c, err := s.Acquire(ctx, testRequest(testKeys()))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.BeginLaunch(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Activate(ctx, testEngine()); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(ctx, cohortProof(t, c.Record())); err != nil {
		t.Fatal(err)
	}
	got, err := s.Proofs(ctx, "conv-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Proof == nil || got[0].Proof.Digest != c.Record().Proof.Digest || got[0].Written.IsZero() {
		t.Fatalf("Proofs = %+v; want the one stopped revision with its time", got)
	}
	if other, err := s.Proofs(ctx, "conv-2"); err != nil || len(other) != 0 {
		t.Fatalf("Proofs of another conversation = %v, %v; want none", other, err)
	}
	if none, err := openStore(t, t.TempDir(), newHost(100)).Proofs(ctx, "conv-1"); err != nil || len(none) != 0 {
		t.Fatalf("Proofs of an empty store = %v, %v", none, err)
	}
}
