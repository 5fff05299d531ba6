package claims

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/proofs"
	"github.com/mosaic-agents/mosaic/protocol"
)

const testUnit = "mosaic-engine-conv\\x2d1-exec\\x2d1.scope"

func deadUnit(boot string) UnitObservation {
	return UnitObservation{Unit: testUnit, LoadState: "not-found", ActiveState: "inactive", BootID: boot,
		ObservedAt: time.Date(2026, 12, 4, 16, 0, 0, 0, time.UTC)}
}

// TestWithdrawOnlyBeforeRelease: a launch that failed before its engine
// was released (Launcher, no incarnation) is withdrawn to stopped when
// the user manager shows its scope dead, and the conversation resumes on
// the same leaf. Withdraw refuses when the incarnation was recorded (the
// engine may have run), when the scope may still hold a process, when the
// observation is of another unit or another boot, and while another
// launcher still runs; the claim is then unchanged.
func TestWithdrawOnlyBeforeRelease(t *testing.T) {
	ctx := context.Background()
	keys := testKeys()
	other := Process{BootID: bootA, PID: 77, StartTime: 770}
	launchBegun := func(t *testing.T, s *Store, h *fakeHost) *Claim {
		c := claimIn(t, s, keys, Reserved)
		if err := c.BeginLaunch(ctx); err != nil {
			t.Fatal(err)
		}
		return c
	}
	tests := []struct {
		name  string
		setup func(t *testing.T, s *Store, h *fakeHost) *Claim
		obs   UnitObservation
		code  string // "" withdraws
	}{
		{"failed launch, scope gone", func(t *testing.T, s *Store, h *fakeHost) *Claim {
			c := claimIn(t, s, keys, Reserved)
			if err := c.BeginLaunch(ctx); err != nil {
				t.Fatal(err)
			}
			if err := c.MarkUncertain(ctx, "launch failed"); err != nil {
				t.Fatal(err)
			}
			return c
		}, deadUnit(bootA), ""},
		{"failed launch, scope failed", launchBegun, UnitObservation{Unit: testUnit, LoadState: "loaded", ActiveState: "failed", BootID: bootA}, ""},
		{"incarnation recorded", func(t *testing.T, s *Store, h *fakeHost) *Claim {
			c := claimIn(t, s, keys, Active)
			if err := c.MarkUncertain(ctx, "engine exited"); err != nil {
				t.Fatal(err)
			}
			return c
		}, deadUnit(bootA), protocol.CodeClaimState},
		{"scope alive", launchBegun, UnitObservation{Unit: testUnit, LoadState: "loaded", ActiveState: "active", BootID: bootA}, protocol.CodeStopProof},
		{"scope deactivating", launchBegun, UnitObservation{Unit: testUnit, LoadState: "loaded", ActiveState: "deactivating", BootID: bootA}, protocol.CodeStopProof},
		{"another unit observed", launchBegun, UnitObservation{Unit: "mosaic-engine-conv\\x2d1-exec\\x2d2.scope", LoadState: "not-found", ActiveState: "inactive", BootID: bootA}, protocol.CodeStopProof},
		{"observed in another boot", launchBegun, deadUnit(bootB), protocol.CodeStopProof},
		// A running scope whose transient unit file was removed, the
		// manager then reloaded, reads not-found and still active.
		{"unit file gone, scope still active", launchBegun, UnitObservation{Unit: testUnit, LoadState: "not-found", ActiveState: "active", BootID: bootA}, protocol.CodeStopProof},
		{"launcher still runs", func(t *testing.T, s *Store, h *fakeHost) *Claim {
			h.self = other
			h.set(other, true)
			c := claimIn(t, s, keys, Reserved)
			if err := c.BeginLaunch(ctx); err != nil {
				t.Fatal(err)
			}
			h.self = Process{BootID: bootA, PID: 100, StartTime: 1000}
			h.set(h.self, true)
			return c
		}, deadUnit(bootA), protocol.CodeAlreadyActive},
		{"no launch began", func(t *testing.T, s *Store, h *fakeHost) *Claim {
			return claimIn(t, s, keys, Reserved)
		}, deadUnit(bootA), protocol.CodeClaimState},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHost(100)
			s := openStore(t, t.TempDir(), h)
			c := tt.setup(t, s, h)
			before := c.Record()
			// LaunchOver gates killing what the scope holds before a
			// withdraw: false exactly when no launch began or its
			// launcher (another process) still runs.
			over, err := c.LaunchOver()
			wantOver := before.Launcher != nil && tt.code != protocol.CodeAlreadyActive
			if err != nil || over != wantOver {
				t.Fatalf("LaunchOver = %v, %v; want %v", over, err, wantOver)
			}
			err = c.Withdraw(ctx, testUnit, tt.obs, "launch failed before release")
			if tt.code != "" {
				wantCode(t, err, tt.code)
				if st := mustCurrent(t, s, keys); st.Seat.Seq != before.Seq || st.Seat.State != before.State {
					t.Fatalf("refused withdraw changed the claim: %s seq %d, was %s seq %d", st.Seat.State, st.Seat.Seq, before.State, before.Seq)
				}
				return
			}
			if err != nil {
				t.Fatalf("withdraw: %v", err)
			}
			rec := mustCurrent(t, s, keys).Seat
			if rec.State != Stopped || rec.Proof == nil || rec.Proof.Type != ProofWithdrawn {
				t.Fatalf("after withdraw: %s %+v", rec.State, rec.Proof)
			}
			if err := Proven(rec); err != nil {
				t.Fatalf("withdrawn revision does not verify: %v", err)
			}
			if sum, err := WithdrawnSummary(rec.Proof); err != nil || sum == "" {
				t.Fatalf("summary %q: %v", sum, err)
			}
			if v, err := Classify(rec, h); err != nil || v != VerdictStopped {
				t.Fatalf("classify after withdraw: %s %v", v, err)
			}
			req := testRequest(keys)
			req.Execution = "exec-2"
			if _, err := s.Resume(ctx, req); err != nil {
				t.Fatalf("resume on the same leaf after withdraw: %v", err)
			}
		})
	}
}

// TestWithdrawnProofBindsItsRevision: a withdrawn proof copied onto a
// revision that records an incarnation proves nothing.
func TestWithdrawnProofBindsItsRevision(t *testing.T) {
	ctx := context.Background()
	h := newHost(100)
	s := openStore(t, t.TempDir(), h)
	c := claimIn(t, s, testKeys(), Reserved)
	if err := c.BeginLaunch(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Withdraw(ctx, testUnit, deadUnit(bootA), "launch failed"); err != nil {
		t.Fatal(err)
	}
	rec := c.Record()
	e := testEngine()
	rec.Engine = &e
	if err := Proven(&rec); err == nil {
		t.Fatal("a withdrawn proof freed a claim whose engine incarnation was recorded")
	}
}

// TestWithdrawnUnitIsTheExecutionsScope: the unit a withdrawal observed
// must be the scope the launcher names from the revision's conversation
// and execution. A caller naming another unit (dead, say a previous
// execution's) is refused, and a withdrawn record whose observation was
// rewritten to another unit (re-digested) frees nothing.
func TestWithdrawnUnitIsTheExecutionsScope(t *testing.T) {
	ctx := context.Background()
	const otherUnit = "mosaic-engine-conv\\x2d1-exec\\x2d0.scope"
	begin := func(t *testing.T) (*Store, *Claim) {
		t.Helper()
		s := openStore(t, t.TempDir(), newHost(100))
		c := claimIn(t, s, testKeys(), Reserved)
		if err := c.BeginLaunch(ctx); err != nil {
			t.Fatal(err)
		}
		return s, c
	}
	t.Run("withdraw names another unit", func(t *testing.T) {
		s, c := begin(t)
		obs := deadUnit(bootA)
		obs.Unit = otherUnit
		wantCode(t, c.Withdraw(ctx, otherUnit, obs, "launch failed"), protocol.CodeStopProof)
		if st := mustCurrent(t, s, testKeys()); st.Seat.State == Stopped {
			t.Fatal("a withdrawal observing another unit stopped the claim")
		}
	})
	t.Run("record rewritten to another unit", func(t *testing.T) {
		_, c := begin(t)
		if err := c.Withdraw(ctx, testUnit, deadUnit(bootA), "launch failed"); err != nil {
			t.Fatal(err)
		}
		rec := c.Record()
		var w withdrawnProof
		if err := json.Unmarshal(rec.Proof.Body, &w); err != nil {
			t.Fatal(err)
		}
		w.Unit.Unit = otherUnit
		body, err := proofs.Canonical(w)
		if err != nil {
			t.Fatal(err)
		}
		rec.Proof = &ProofRecord{Type: ProofWithdrawn, Digest: sum(body), Body: body}
		if err := Proven(&rec); err == nil {
			t.Fatal("a withdrawn record observing another unit frees the claim")
		}
	})
}
