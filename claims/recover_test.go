package claims

import (
	"context"
	"fmt"
	"testing"

	"github.com/mosaic-agents/mosaic/proofs"
	"github.com/mosaic-agents/mosaic/protocol"
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
				wantCode(t, err, protocol.CodeUnsafeReplacement)
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
	wantCode(t, err, protocol.CodeAlreadyActive)
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
	wantCode(t, err, protocol.CodeAlreadyActive) // the session is held under another seat (W4)
}

// W8, W9: resume after a proven stop.
func TestResume(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Request)
		code   string
	}{
		{"same pins (W8)", func(*Request) {}, ""},
		{"changed binary (W9)", func(r *Request) { r.Pins.BinarySHA256 = "cc" }, protocol.CodePinMismatch},
		{"changed argv digest (W9)", func(r *Request) { r.Pins.ArgvDigest = "dd" }, protocol.CodePinMismatch},
		{"changed engine version", func(r *Request) { r.Pins.EngineVersion = "0.86.0" }, protocol.CodePinMismatch},
		{"changed branch (W9)", func(r *Request) { r.Branch = "b.x" }, protocol.CodeTarget},
		{"changed leaf (W9)", func(r *Request) { r.Leaf = "leaf-10" }, protocol.CodeTarget},
		{"other conversation", func(r *Request) { r.Conversation = "conv-2" }, protocol.CodeTarget},
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
				wantCode(t, err, protocol.CodeAlreadyActive)
			} else {
				wantCode(t, err, protocol.CodeUnsafeReplacement)
			}
		}
		s := openStore(t, t.TempDir(), newHost(100))
		_, err := s.Resume(context.Background(), testRequest(testKeys()))
		wantCode(t, err, protocol.CodeStopProof)
	})
}

// A reservation that reached its seat key but lost its session key to
// another claim is released once its writer is gone, and kept while the
// writer lives (it may still be undoing it itself).
func TestPartialReservationReleasedWhenWriterGone(t *testing.T) {
	for _, writerAlive := range []bool{false, true} {
		t.Run(fmt.Sprintf("writer alive %t", writerAlive), func(t *testing.T) {
			ctx := context.Background()
			root := t.TempDir()
			h := newHost(300)
			s := openStore(t, root, h)
			other := Keys{Seat: SeatKey{Seat: "darkwing", Project: "mosaic", Workspace: "/w"}, Session: testKeys().Session}
			claimIn(t, s, other, Active) // holds the session key
			dead := Process{BootID: bootA, PID: 100, StartTime: 1000}
			h.set(dead, writerAlive)
			keys := testKeys()
			partial := Record{Format: formatVersion, KeyKind: kindSeat, Revision: 1, Claim: "partial", Seq: 1,
				Seat: keys.Seat, Session: keys.Session, Binding: "b", Harness: "pi", Conversation: "conv-1",
				Execution: "exec-1", Controller: dead, Generation: 1, State: Reserved}
			if err := s.publish(s.seatDir(keys.Seat), partial); err != nil {
				t.Fatal(err)
			}
			free := Keys{Seat: keys.Seat, Session: "pi-session-9"}
			_, err := s.Acquire(ctx, testRequest(free))
			if writerAlive {
				wantCode(t, err, protocol.CodeAlreadyActive)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			sl, _ := readSlot(s.seatDir(keys.Seat), kindSeat)
			if r := sl.revs[1]; r.Claim != "partial" || r.State != Stopped || r.Proof.Type != ProofUnlaunched || Proven(&r) != nil {
				t.Fatalf("partial reservation not released: %+v", r)
			}
		})
	}
}

// A crash after BeginLaunch and before Activate: an engine may run with no
// recorded incarnation, so the reservation is never released as
// unlaunched; it is uncertain until a proof for its execution.
func TestLaunchBegunNeverReleasedAsUnlaunched(t *testing.T) {
	ctx := context.Background()
	t.Run("holder abandons", func(t *testing.T) {
		s := openStore(t, t.TempDir(), newHost(100))
		c := claimIn(t, s, testKeys(), Reserved)
		if err := c.BeginLaunch(ctx); err != nil {
			t.Fatal(err)
		}
		wantCode(t, c.Abandon(ctx, "launch failed"), protocol.CodeClaimState)
		if err := c.MarkUncertain(ctx, "launch failed after it began"); err != nil {
			t.Fatal(err)
		}
		if err := c.Conclude(ctx, observation(c.Record())); err != nil {
			t.Fatal(err)
		}
		if !mustCurrent(t, s, testKeys()).Free {
			t.Fatal("not freed by a cohort proof")
		}
	})
	for _, reboot := range []bool{false, true} {
		t.Run(fmt.Sprintf("controller crashed, reboot %t", reboot), func(t *testing.T) {
			root := t.TempDir()
			c := claimIn(t, openStore(t, root, newHost(100)), testKeys(), Reserved)
			if err := c.BeginLaunch(ctx); err != nil {
				t.Fatal(err)
			}
			h := newHost(200)
			if reboot {
				h.reboot(bootB)
			}
			s := openStore(t, root, h)
			got, err := s.Recover(ctx, testKeys())
			if err != nil {
				t.Fatal(err)
			}
			if reboot {
				if got.Verdict != VerdictStopped || got.Claim.Record().Proof.Type != proofs.TypeBoot {
					t.Fatalf("%s %+v", got.Verdict, got.Claim.Record().Proof)
				}
				return
			}
			if got.Verdict != VerdictObserve || got.Claim.Record().State != Uncertain {
				t.Fatalf("%s %s", got.Verdict, got.Claim.Record().State)
			}
			_, err = s.Acquire(ctx, testRequest(testKeys()))
			wantCode(t, err, protocol.CodeUnsafeReplacement)
			if err := got.Claim.Conclude(ctx, observation(got.Claim.Record())); err != nil {
				t.Fatal(err)
			}
		})
	}
}
