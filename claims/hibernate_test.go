package claims

import (
	"context"
	"errors"
	"testing"
)

// TestWakeableOnlyAfterHibernate: the one launch without a confirmation
// is allowed by a stopped revision of the idle policy with a cohort proof,
// and by nothing else: a force stop, an uncertain or a stopping claim, and
// the revision after a hibernated one (the policy is per revision) each
// need recover.
func TestWakeableOnlyAfterHibernate(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir(), newHost(100))
	keys := testKeys()
	c := claimIn(t, s, keys, Stopping)
	if err := c.Hibernate(ctx, cohortProof(t, c.Record()), "idle for 1m0s", "leaf-at-hibernate", "", nil); err != nil {
		t.Fatal(err)
	}
	rec := mustCurrent(t, s, keys).Seat
	if err := Wakeable(rec); err != nil || rec.Leaf != "leaf-at-hibernate" || rec.Policy != PolicyHibernate || rec.Reason != "hibernated: idle for 1m0s" {
		t.Fatalf("hibernated %+v: wakeable %v", rec, err)
	}
	if err := Proven(rec); err != nil {
		t.Fatalf("a hibernated claim is a proven stop: %v", err)
	}
	for _, tc := range []struct {
		name string
		rec  func(t *testing.T) *Record
	}{
		{"force stop", func(t *testing.T) *Record {
			s := openStore(t, t.TempDir(), newHost(100))
			claimIn(t, s, keys, Stopped)
			return mustCurrent(t, s, keys).Seat
		}},
		{"uncertain", func(t *testing.T) *Record {
			s := openStore(t, t.TempDir(), newHost(100))
			claimIn(t, s, keys, Uncertain)
			return mustCurrent(t, s, keys).Seat
		}},
		{"policy without a proof", func(t *testing.T) *Record {
			r := *rec
			r.Proof = nil
			return &r
		}},
		{"the next revision", func(t *testing.T) *Record {
			c2, err := s.Acquire(ctx, testRequest(keys))
			if err != nil {
				t.Fatal(err)
			}
			if err := c2.BeginLaunch(ctx); err != nil {
				t.Fatal(err)
			}
			r := c2.Record()
			return &r
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := Wakeable(tc.rec(t)); !errors.Is(err, ErrNotWakeable) {
				t.Fatalf("Wakeable: %v; want ErrNotWakeable", err)
			}
		})
	}
	t.Run("only from stopping", func(t *testing.T) {
		s := openStore(t, t.TempDir(), newHost(100))
		c := claimIn(t, s, keys, Active)
		if err := c.Hibernate(ctx, cohortProof(t, c.Record()), "", "", "", nil); err == nil {
			t.Fatal("hibernated an active claim that never recorded stopping")
		}
	})
}
