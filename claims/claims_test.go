package claims

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/proofs"
	"github.com/mosaic-agents/mosaic/protocol"
)

func TestLifecycleWritesBothKeys(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir(), newHost(100))
	keys := testKeys()
	c := claimIn(t, s, keys, Stopped)
	for _, dir := range []string{s.seatDir(keys.Seat), s.sessionDir(keys.Session)} {
		names, err := filepath.Glob(filepath.Join(dir, "*"))
		if err != nil {
			t.Fatal(err)
		}
		var base []string
		for _, n := range names {
			base = append(base, filepath.Base(n))
		}
		if got := strings.Join(base, " "); got != "r0000000001.json r0000000002.json r0000000003.json r0000000004.json" {
			t.Fatalf("%s holds %s", dir, got)
		}
	}
	st := mustCurrent(t, s, keys)
	if !st.Free || !sameRevision(*st.Seat, *st.Session) || st.Seat.State != Stopped || st.Seat.Proof.Type != proofs.TypeCohort {
		t.Fatalf("after stop: %+v", st)
	}
	if err := Proven(st.Seat); err != nil {
		t.Fatal(err)
	}
	// A proven stop frees both keys for a new claim.
	c2, err := s.Acquire(ctx, testRequest(keys))
	if err != nil {
		t.Fatal(err)
	}
	if c2.Record().Claim == c.Record().Claim || c2.Record().Generation != 1 {
		t.Fatalf("new claim %+v", c2.Record())
	}
}

// W2, W3, W4: acquisition against every held state, through either key,
// leaves no partial claim.
func TestAcquireRefusesHeldKeys(t *testing.T) {
	other := testKeys()
	other.Seat.Seat, other.Session = "darkwing", "pi-session-2"
	tests := []struct {
		state State
		code  string
	}{
		{Reserved, protocol.CodeAlreadyActive},
		{Active, protocol.CodeAlreadyActive},
		{Stopping, protocol.CodeUnsafeReplacement},
		{Uncertain, protocol.CodeUnsafeReplacement},
	}
	for _, tt := range tests {
		for _, probe := range []struct {
			name string
			keys func(Keys) Keys
		}{
			{"same keys", func(k Keys) Keys { return k }},
			{"same session other seat (W4)", func(k Keys) Keys { return Keys{Seat: other.Seat, Session: k.Session} }},
			{"same seat other session (W4)", func(k Keys) Keys { return Keys{Seat: k.Seat, Session: other.Session} }},
		} {
			t.Run(string(tt.state)+"/"+probe.name, func(t *testing.T) {
				s := openStore(t, t.TempDir(), newHost(100))
				keys := testKeys()
				c := claimIn(t, s, keys, tt.state)
				before := c.Record()
				_, err := s.Acquire(context.Background(), testRequest(probe.keys(keys)))
				wantCode(t, err, tt.code)
				st := mustCurrent(t, s, keys)
				if !sameRevision(*st.Seat, before) || !sameRevision(*st.Session, before) {
					t.Fatalf("held claim changed: %+v", st)
				}
				for _, dir := range []string{s.seatDir(other.Seat), s.sessionDir(other.Session)} {
					if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
						t.Fatalf("partial claim left in %s", dir)
					}
				}
			})
		}
	}
}

// W3: a stopped revision whose proof does not verify, or is about another
// execution, frees nothing.
func TestStoppedWithoutProofIsUnsafe(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Record)
	}{
		{"digest edited", func(r *Record) { r.Proof.Digest = strings.Repeat("0", 64) }},
		{"body edited", func(r *Record) {
			r.Proof.Body = []byte(strings.Replace(string(r.Proof.Body), `"populated":0`, `"populated":1`, 1))
		}},
		{"proof of another cgroup", func(r *Record) { r.Engine.Cgroup = "/other.scope" }},
		{"proof of another boot", func(r *Record) { r.Engine.BootID = bootB }},
		{"empty proof body", func(r *Record) { r.Proof.Body = []byte(`{}`) }},
		{"unlaunched proof on a launched claim", func(r *Record) {
			pr, _ := newUnlaunchedRecord(r, "forged")
			r.Proof = pr
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openStore(t, t.TempDir(), newHost(100))
			keys := testKeys()
			c := claimIn(t, s, keys, Stopped)
			rec := c.Record()
			tt.mutate(&rec)
			rec.Seq++
			// Write the bad revision under both keys, as a buggy writer might.
			for _, kd := range []struct{ kind, dir string }{{kindSeat, s.seatDir(keys.Seat)}, {kindSession, s.sessionDir(keys.Session)}} {
				sl, err := readSlot(kd.dir, kd.kind)
				if err != nil {
					t.Fatal(err)
				}
				r := rec
				r.KeyKind, r.Revision = kd.kind, sl.next()
				if err := s.publish(kd.dir, r); err != nil {
					t.Fatal(err)
				}
			}
			_, err := s.Acquire(context.Background(), testRequest(keys))
			wantCode(t, err, protocol.CodeUnsafeReplacement)
			if st := mustCurrent(t, s, keys); st.Free {
				t.Fatal("stopped without proof reads as free")
			}
		})
	}
}

// Transitions to stopped need a proof that verifies and binds; nothing
// else frees a claim.
func TestStopNeedsBindingProof(t *testing.T) {
	ctx := context.Background()
	otherExec := func(t *testing.T, rec Record) proofs.Proof {
		rec.Execution = "exec-2"
		return cohortProof(t, rec)
	}
	tests := []struct {
		name  string
		proof func(*testing.T, Record) proofs.Proof
		code  string
	}{
		{"nil proof", func(*testing.T, Record) proofs.Proof { return nil }, protocol.CodeStopProof},
		{"another execution", otherExec, protocol.CodeStopProof},
		{"tampered after build", func(t *testing.T, r Record) proofs.Proof {
			p := cohortProof(t, r)
			p.Populated = 1
			return p
		}, protocol.CodeStopProof},
		{"boot proof while the boot is current", func(t *testing.T, r Record) proofs.Proof {
			return &proofs.BootProof{Type: proofs.TypeBoot, Version: 1, Conversation: r.Conversation,
				Execution: r.Execution, RecordedBootID: bootA, CurrentBootID: bootA}
		}, protocol.CodeStopProof},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openStore(t, t.TempDir(), newHost(100))
			c := claimIn(t, s, testKeys(), Stopping)
			before := c.Record()
			err := c.Stop(ctx, tt.proof(t, c.Record()))
			wantCode(t, err, tt.code)
			if st := mustCurrent(t, s, testKeys()); !sameRevision(*st.Seat, before) {
				t.Fatalf("claim changed: %+v", st.Seat)
			}
		})
	}
	t.Run("process-group engine never stopped by a cohort proof (mutant 7)", func(t *testing.T) {
		s := openStore(t, t.TempDir(), newHost(100))
		c, err := s.Acquire(ctx, testRequest(testKeys()))
		if err != nil {
			t.Fatal(err)
		}
		pg := testEngine()
		pg.Cgroup = ""
		if err := c.Activate(ctx, pg); err != nil {
			t.Fatal(err)
		}
		rec := c.Record()
		rec.Engine = &Process{BootID: bootA, PID: 4200, StartTime: 4000, Cgroup: testCgroup}
		err = c.Stop(ctx, cohortProof(t, rec))
		wantCode(t, err, protocol.CodeStopProof)
		if !errors.Is(err, proofs.ErrProcessGroup) {
			t.Fatalf("err %v lacks ErrProcessGroup", err)
		}
	})
}

// K2, K3 at this layer: Conclude reaches stopped only from a complete
// scope observation; anything else leaves the claim uncertain.
func TestConclude(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*proofs.Observation)
		want   State
		err    error
	}{
		{"complete observation (K1)", func(*proofs.Observation) {}, Stopped, nil},
		{"SIGTERM acknowledged, member alive (K3, mutant 6)", func(o *proofs.Observation) {
			o.Members[1].Died, o.Members[1].DiedAt = false, 0
		}, Uncertain, proofs.ErrDeathUnobserved},
		{"process-group fallback (K2, mutant 7)", func(o *proofs.Observation) { o.Kind = proofs.KindProcessGroup },
			Uncertain, proofs.ErrProcessGroup},
		{"cgroup gone, not observed empty (K15)", func(o *proofs.Observation) { o.CgroupPresent = false },
			Uncertain, proofs.ErrCgroupAbsent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			s := openStore(t, t.TempDir(), newHost(100))
			c := claimIn(t, s, testKeys(), Stopping)
			obs := observation(c.Record())
			tt.mutate(&obs)
			err := c.Conclude(ctx, obs)
			if !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
				t.Fatalf("err %v want %v", err, tt.err)
			}
			st := mustCurrent(t, s, testKeys())
			if st.Seat.State != tt.want || st.Session.State != tt.want {
				t.Fatalf("state %s/%s want %s", st.Seat.State, st.Session.State, tt.want)
			}
			if st.Free != (tt.want == Stopped) {
				t.Fatalf("free %t in %s", st.Free, tt.want)
			}
		})
	}
}

func TestTransitionsFromWrongState(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir(), newHost(100))
	c := claimIn(t, s, testKeys(), Active)
	wantCode(t, c.Activate(ctx, testEngine()), protocol.CodeClaimState)
	wantCode(t, c.Abandon(ctx, "x"), protocol.CodeClaimState)
	if err := c.Conclude(ctx, observation(c.Record())); err != nil {
		t.Fatal(err) // active -> stopped with a complete proof is allowed
	}
	wantCode(t, c.BeginStop(ctx, "again"), protocol.CodeClaimState)
	wantCode(t, c.MarkUncertain(ctx, "late"), protocol.CodeClaimState)
}

// A handle whose claim moved under it refuses stale-generation.
func TestStaleHandle(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	h := newHost(100)
	s := openStore(t, root, h)
	c := claimIn(t, s, testKeys(), Active)
	h2 := newHost(200)
	h2.alive = h.alive // same machine
	h.set(h.self, false)
	h.set(testEngine(), true)
	// The first controller is gone; a second recovers (generation +1).
	rec, err := openStore(t, root, h2).Recover(ctx, testKeys())
	if err != nil {
		t.Fatal(err)
	}
	if rec.Verdict != VerdictEngineAlive || rec.Claim.Record().Generation != 2 {
		t.Fatalf("recovery %+v %+v", rec.Verdict, rec.Claim.Record())
	}
	wantCode(t, c.BeginStop(ctx, "old controller"), protocol.CodeStaleGeneration)
}

func TestAbandonReleasesUnlaunchedReservation(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir(), newHost(100))
	c := claimIn(t, s, testKeys(), Reserved)
	if err := c.Abandon(ctx, "launch failed"); err != nil {
		t.Fatal(err)
	}
	st := mustCurrent(t, s, testKeys())
	if !st.Free || st.Seat.Proof.Type != ProofUnlaunched {
		t.Fatalf("%+v", st.Seat)
	}
}
