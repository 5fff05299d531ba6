package claims

import (
	"context"
	"errors"
	"syscall"
	"testing"

	"github.com/mosaic-agents/mosaic/proofs"
	"github.com/mosaic-agents/mosaic/protocol"
)

// TestStopRetriedUntilWritten: a `stopped` revision that could not be
// written (ENOSPC at any step, under either key) is written by the same
// call once the space is back, with the same proof and no other
// transition in between; both keys end stopped. On a build without the
// retry a partly written stop (seat key stopped, session key lagging, or
// a link that landed before a failed fsync) refused every later attempt
// claim-state.
func TestStopRetriedUntilWritten(t *testing.T) {
	points := []string{FaultTempCreated, FaultTempWritten, FaultTempSynced, FaultLinked, FaultDirSynced, FaultBetweenKeys}
	for _, point := range points {
		for _, which := range []string{kindSeat, kindSession} {
			t.Run(point+"/"+which, func(t *testing.T) {
				ctx := context.Background()
				full := false
				hits := 0
				s := openStore(t, t.TempDir(), newHost(100), WithFault(func(p, path string) error {
					if !full || p != point || (point != FaultBetweenKeys && !inKind(path, which)) ||
						(point == FaultBetweenKeys && which == kindSession) {
						return nil
					}
					hits++
					return syscall.ENOSPC
				}))
				c := claimIn(t, s, testKeys(), Stopping)
				p := cohortProof(t, c.Record())
				full = true
				err := c.Stop(ctx, p)
				if hits == 0 {
					t.Skip("fault point not on this key")
				}
				wantCode(t, err, protocol.CodeClaimStore)
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("cause lost: %v", err)
				}
				// Still full: the retry fails the same way, never another way.
				if err := c.Stop(ctx, p); err != nil {
					wantCode(t, err, protocol.CodeClaimStore)
				}
				full = false
				if err := c.Stop(ctx, p); err != nil {
					t.Fatalf("retry after the space came back: %v", err)
				}
				if rec := c.Record(); rec.State != Stopped || rec.Proof == nil || rec.Proof.Digest != p.Digest {
					t.Fatalf("handle after the retry: %s %+v", rec.State, rec.Proof)
				}
				st := mustCurrent(t, s, testKeys())
				if !st.Free || st.Seat.State != Stopped || !sameRevision(*st.Seat, *st.Session) || st.Seat.Proof.Digest != p.Digest {
					t.Fatalf("keys after the retry: %+v / %+v", st.Seat, st.Session)
				}
			})
		}
	}
}

// TestStopBindsCgroupID: an incarnation recorded with its cgroup id is
// stopped only by a proof about that cgroup id: a cgroup re-created at the
// same path cannot stand in for it.
func TestStopBindsCgroupID(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		proved uint64
		ok     bool
	}{{"same id", 77, true}, {"other id", 78, false}, {"no id", 0, false}} {
		t.Run(tc.name, func(t *testing.T) {
			s := openStore(t, t.TempDir(), newHost(100))
			c, err := s.Acquire(ctx, testRequest(testKeys()))
			if err != nil {
				t.Fatal(err)
			}
			e := testEngine()
			e.CgroupID = 77
			if err := c.BeginLaunch(ctx); err != nil {
				t.Fatal(err)
			}
			if err := c.Activate(ctx, e); err != nil {
				t.Fatal(err)
			}
			obs := observation(c.Record())
			obs.CgroupID = tc.proved
			p, err := proofs.NewCohortProof(obs)
			if err != nil {
				t.Fatal(err)
			}
			err = c.Stop(ctx, p)
			if tc.ok != (err == nil) {
				t.Fatalf("stop with a proof of cgroup id %d over an incarnation of id 77: %v", tc.proved, err)
			}
			if !tc.ok {
				wantCode(t, err, protocol.CodeStopProof)
			}
		})
	}
}
