package claims

import (
	"context"
	"testing"

	"github.com/mosaic-agents/mosaic/proofs"
)

// Restart classification (W6, W7, K10) and what Recover records.
func TestRecover(t *testing.T) {
	tests := []struct {
		name    string
		state   State
		world   func(h *fakeHost) // after the first controller died
		verdict Verdict
		after   State
		proof   string
	}{
		{"other boot id (W7)", Active, func(h *fakeHost) { h.reboot(bootB) }, VerdictStopped, Stopped, proofs.TypeBoot},
		{"other boot while stopping", Stopping, func(h *fakeHost) { h.reboot(bootB) }, VerdictStopped, Stopped, proofs.TypeBoot},
		{"same boot, engine alive (W6)", Active, func(h *fakeHost) { h.set(testEngine(), true) }, VerdictEngineAlive, Uncertain, ""},
		{"same boot, engine gone", Active, func(h *fakeHost) {}, VerdictObserve, Uncertain, ""},
		{"uncertain, engine alive", Uncertain, func(h *fakeHost) { h.set(testEngine(), true) }, VerdictEngineAlive, Uncertain, ""},
		{"crash during force stop (K10)", Stopping, func(h *fakeHost) { h.set(testEngine(), true) }, VerdictObserve, Stopping, ""},
		{"pid reused by another process", Active, func(h *fakeHost) {
			e := testEngine()
			e.StartTime++
			h.set(e, true)
		}, VerdictObserve, Uncertain, ""},
		{"reservation, controller gone", Reserved, func(h *fakeHost) {}, VerdictStopped, Stopped, ProofUnlaunched},
		{"reservation, other boot", Reserved, func(h *fakeHost) { h.reboot(bootB) }, VerdictStopped, Stopped, ProofUnlaunched},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			root := t.TempDir()
			first := newHost(100)
			c := claimIn(t, openStore(t, root, first), testKeys(), tt.state)
			// The first controller is SIGKILLed; a new one starts.
			h := newHost(200)
			tt.world(h)
			s := openStore(t, root, h)
			got, err := s.Recover(ctx, testKeys())
			if err != nil {
				t.Fatal(err)
			}
			if got.Verdict != tt.verdict {
				t.Fatalf("verdict %s want %s", got.Verdict, tt.verdict)
			}
			rec := got.Claim.Record()
			if rec.State != tt.after || rec.Generation != c.Record().Generation+1 || rec.Controller != h.self {
				t.Fatalf("recovered record %+v", rec)
			}
			st := mustCurrent(t, s, testKeys())
			if !sameRevision(*st.Seat, rec) || !sameRevision(*st.Session, rec) {
				t.Fatalf("keys disagree: %+v", st)
			}
			if tt.proof != "" {
				if st.Seat.Proof.Type != tt.proof || Proven(st.Seat) != nil || !st.Free {
					t.Fatalf("proof %+v free %t", st.Seat.Proof, st.Free)
				}
			} else {
				// No launch: a new acquisition still refuses.
				_, err := s.Acquire(ctx, testRequest(testKeys()))
				wantCode(t, err, CodeUnsafeReplacement)
			}
		})
	}
}

func TestRecoverLeavesLiveControllerAlone(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	first := newHost(100)
	c := claimIn(t, openStore(t, root, first), testKeys(), Active)
	second := newHost(200)
	second.set(first.self, true) // the first controller still runs (H16)
	_, err := openStore(t, root, second).Recover(ctx, testKeys())
	wantCode(t, err, CodeAlreadyActive)
	if st := mustCurrent(t, openStore(t, root, first), testKeys()); !sameRevision(*st.Seat, c.Record()) {
		t.Fatal("live controller's claim changed")
	}
}

func TestRecoverThenConclude(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	claimIn(t, openStore(t, root, newHost(100)), testKeys(), Active)
	s := openStore(t, root, newHost(200))
	got, err := s.Recover(ctx, testKeys())
	if err != nil || got.Verdict != VerdictObserve {
		t.Fatalf("%v %+v", err, got)
	}
	if err := got.Claim.Conclude(ctx, observation(got.Claim.Record())); err != nil {
		t.Fatal(err)
	}
	if !mustCurrent(t, s, testKeys()).Free {
		t.Fatal("not free after a cohort proof")
	}
}

func TestRecoverFreeAndForeign(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	s := openStore(t, root, newHost(100))
	got, err := s.Recover(ctx, testKeys())
	if err != nil || got.Verdict != VerdictFree || got.Claim != nil {
		t.Fatalf("%v %+v", err, got)
	}
	claimIn(t, s, testKeys(), Active)
	other := testKeys()
	other.Seat.Seat = "darkwing"
	_, err = openStore(t, root, newHost(200)).Recover(ctx, other)
	wantCode(t, err, CodeAlreadyActive) // the session is held under another seat (W4)
}

// W8, W9: resume after a proven stop.
func TestResume(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Request)
		code   string
	}{
		{"same pins (W8)", func(*Request) {}, ""},
		{"changed binary (W9)", func(r *Request) { r.Pins.BinarySHA256 = "cc" }, CodePinMismatch},
		{"changed argv digest (W9)", func(r *Request) { r.Pins.ArgvDigest = "dd" }, CodePinMismatch},
		{"changed engine version", func(r *Request) { r.Pins.EngineVersion = "0.86.0" }, CodePinMismatch},
		{"changed branch (W9)", func(r *Request) { r.Branch = "b.x" }, CodeTarget},
		{"changed leaf (W9)", func(r *Request) { r.Leaf = "leaf-10" }, CodeTarget},
		{"other conversation", func(r *Request) { r.Conversation = "conv-2" }, CodeTarget},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			s := openStore(t, t.TempDir(), newHost(100))
			old := claimIn(t, s, testKeys(), Stopped).Record()
			req := testRequest(testKeys())
			req.Execution, req.Binding = "exec-2", "binding-2"
			tt.mutate(&req)
			c, err := s.Resume(ctx, req)
			st := mustCurrent(t, s, testKeys())
			if tt.code != "" {
				wantCode(t, err, tt.code)
				if !sameRevision(*st.Seat, old) || !sameRevision(*st.Session, old) {
					t.Fatalf("claim changed: %+v", st.Seat)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			r := c.Record()
			if r.Claim != old.Claim || r.Seq != old.Seq+1 || r.Generation != old.Generation+1 || r.State != Reserved ||
				r.Conversation != old.Conversation || r.Branch != old.Branch || r.Leaf != old.Leaf ||
				r.Execution != "exec-2" || r.Engine != nil || r.Proof != nil {
				t.Fatalf("resumed %+v from %+v", r, old)
			}
			if !sameRevision(*st.Session, r) {
				t.Fatal("session key not written")
			}
		})
	}
	t.Run("without a proven stop (K6)", func(t *testing.T) {
		for _, state := range []State{Active, Stopping, Uncertain} {
			s := openStore(t, t.TempDir(), newHost(100))
			claimIn(t, s, testKeys(), state)
			_, err := s.Resume(context.Background(), testRequest(testKeys()))
			if state == Active {
				wantCode(t, err, CodeAlreadyActive)
			} else {
				wantCode(t, err, CodeUnsafeReplacement)
			}
		}
		s := openStore(t, t.TempDir(), newHost(100))
		_, err := s.Resume(context.Background(), testRequest(testKeys()))
		wantCode(t, err, CodeStopProof)
	})
}
