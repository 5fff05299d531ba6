package proofs

import (
	"errors"
	"strings"
	"testing"
)

// removedObservation is a kill phase that found the scope already gone:
// systemd stopped it (the unit is not loaded any more), the engine cgroup
// is ENOENT, the engine and the anchor were reaped, and a TERM-phase
// member's death was observed on its pidfd.
func removedObservation() Observation {
	o := goodObservation()
	o.Cgroup += "/engine"
	o.Confinement.CgroupRoot = o.Cgroup
	o.Basis = BasisCgroupRemoved
	o.MembershipComplete = false
	o.CgroupPresent, o.Populated = false, 0
	o.CgroupID = 4711
	o.Members = o.Members[:1]
	o.Removal = &Removal{
		Seen:          RemovedENOENT,
		ManagerCgroup: "/user.slice/user-1000.slice/user@1000.service",
		UnitLoadState: "not-found", UnitActiveState: "inactive",
		Known: []KnownDeath{
			{Role: RoleEngine, PID: 4200, StartTime: 4000, How: DeathReaped, DiedAt: 60_000_000_200},
			{Role: RoleAnchor, PID: 4199, StartTime: 3990, How: DeathGone, DiedAt: 60_000_000_300},
		},
	}
	o.ActiveState, o.Result = "inactive", ""
	return o
}

func TestCgroupRemovedProof(t *testing.T) {
	p, err := NewCohortProof(removedObservation())
	if err != nil {
		t.Fatal(err)
	}
	enc, err := Encode(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"basis":"cgroup-removed"`, `"cgroup_id":4711`, `"seen":"enoent"`, `"role":"anchor"`} {
		if !strings.Contains(string(enc), want) {
			t.Fatalf("encoding lacks %s: %s", want, enc)
		}
	}
	_, rep, err := VerifyBytes(enc)
	if err != nil || !rep.OK() {
		t.Fatalf("verify: %v %v", err, rep.Err())
	}
	for _, name := range []string{"basis", "cgroup-removed", "cgroup-view", "unit-invocation", "known-deaths"} {
		found := false
		for _, c := range rep.Checks {
			found = found || c.Name == name && c.OK
		}
		if !found {
			t.Errorf("no passing check %q in %+v", name, rep.Checks)
		}
	}
}

// TestCgroupRemovedRefuses: each piece of the removal evidence is needed.
func TestCgroupRemovedRefuses(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Observation)
		want   error
	}{
		{"no removal evidence", func(o *Observation) { o.Removal = nil }, ErrCgroupAbsent},
		{"cgroup present", func(o *Observation) { o.CgroupPresent = true }, ErrCgroupAbsent},
		{"replaced by the same id", func(o *Observation) { o.Removal.Seen, o.Removal.SeenCgroupID = RemovedReplaced, 4711 }, ErrCgroupAbsent},
		{"replaced without a recorded id", func(o *Observation) {
			o.CgroupID = 0
			o.Removal.Seen, o.Removal.SeenCgroupID = RemovedReplaced, 99
		}, ErrCgroupAbsent},
		{"unknown sighting", func(o *Observation) { o.Removal.Seen = "vanished" }, ErrCgroupAbsent},
		{"no view check", func(o *Observation) { o.Removal.ManagerCgroup = "" }, ErrMalformed},
		{"view not above the cgroup", func(o *Observation) { o.Removal.ManagerCgroup = "/system.slice" }, ErrMalformed},
		{"our invocation still active", func(o *Observation) {
			o.Removal.UnitInvocationID, o.Removal.UnitActiveState = o.InvocationID, "active"
		}, ErrUnitActive},
		{"engine death missing", func(o *Observation) { o.Removal.Known = o.Removal.Known[1:] }, ErrDeathUnobserved},
		{"anchor death missing", func(o *Observation) { o.Removal.Known = o.Removal.Known[:1] }, ErrDeathUnobserved},
		{"engine twice", func(o *Observation) { o.Removal.Known[1].Role = RoleEngine }, ErrDeathUnobserved},
		{"death not observed", func(o *Observation) { o.Removal.Known[0].How = "" }, ErrDeathUnobserved},
		{"death after the observation", func(o *Observation) { o.Removal.Known[1].DiedAt = o.ObservedAt + 1 }, ErrDeathUnobserved},
		{"death before the start", func(o *Observation) { o.Removal.Known[0].DiedAt = 1 }, ErrDeathUnobserved},
		{"TERM-phase member alive", func(o *Observation) { o.Members[0].Died = false }, ErrDeathUnobserved},
		{"evidence on an empty-observed proof", func(o *Observation) {
			o.Basis, o.MembershipComplete, o.CgroupPresent = BasisEmptyObserved, true, true
		}, ErrMalformed},
		{"unknown basis", func(o *Observation) { o.Basis = "trust-me" }, ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := removedObservation()
			tt.mutate(&o)
			p, err := NewCohortProof(o)
			if err == nil {
				t.Fatalf("built %+v", p)
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("error %v, want %v", err, tt.want)
			}
		})
	}
}

// TestBasisCannotBeStripped: a cgroup-removed proof edited to state no
// basis is held to the empty-observed checks, which it fails; a proof
// written before bases existed (no basis field) still verifies.
func TestBasisCannotBeStripped(t *testing.T) {
	p, err := NewCohortProof(removedObservation())
	if err != nil {
		t.Fatal(err)
	}
	p.Basis = ""
	p.Digest, _ = digest(p)
	if rep := Verify(p); rep.OK() {
		t.Fatal("a removal proof without its basis verified as empty-observed")
	}
	old, err := NewCohortProof(goodObservation())
	if err != nil {
		t.Fatal(err)
	}
	old.Basis = ""
	old.Digest, _ = digest(old)
	enc, _ := Encode(old)
	if strings.Contains(string(enc), "basis") {
		t.Fatalf("legacy encoding names a basis: %s", enc)
	}
	if _, rep, err := VerifyBytes(enc); err != nil || !rep.OK() {
		t.Fatalf("a proof without a basis field (written before bases) no longer verifies: %v %v", err, rep.Err())
	}
}
