package proofs

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

const (
	bootA = "0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0"
	bootB = "11111111-2222-4333-8444-555555555555"
)

// goodObservation is a complete kill-phase observation of a two-member
// scope: the engine and a tool child that called setsid.
func goodObservation() Observation {
	return Observation{
		Kind:               KindScope,
		Stop:               "stop-1",
		Conversation:       "conv-1",
		Execution:          "exec-1",
		Unit:               "mosaic-engine-conv\\x2d1-exec\\x2d1.scope",
		InvocationID:       "0123456789abcdef0123456789abcdef",
		Cgroup:             cgroupA,
		BootID:             bootA,
		ClockTicks:         100,
		MembershipComplete: true,
		Members: []MemberObservation{
			{PID: 4242, StartTime: 5000, Comm: "sh", Died: true, DiedAt: 60_000_000_000},
			{PID: 4200, StartTime: 4000, Comm: "node", Died: true, DiedAt: 60_000_000_100},
		},
		CgroupPresent: true,
		Populated:     0,
		ObservedAt:    60_000_000_500,
		ObservedWall:  time.Date(2026, 12, 2, 10, 0, 0, 5, time.UTC),
		ActiveState:   "inactive",
		Result:        "success",
		Confinement:   goodConfinement(cgroupA),
	}
}

const cgroupA = "/user.slice/user-1000.slice/user@1000.service/app.slice/mosaic-engine-conv\\x2d1-exec\\x2d1.scope"

// goodConfinement is the evidence of an engine confined with its cgroup
// namespace rooted at cg.
func goodConfinement(cg string) Confinement {
	return Confinement{
		Confined: true,
		Namespaces: []Namespace{
			{Type: "user", Engine: 4026532001, Controller: 4026531837},
			{Type: "mnt", Engine: 4026532002, Controller: 4026531841},
			{Type: "pid", Engine: 4026532003, Controller: 4026531836},
			{Type: "cgroup", Engine: 4026532004, Controller: 4026531835},
		},
		Masked:     []string{"/run/user/1000/bus", "/run/user/1000/systemd", "/run/user/1000/mosaic", "/run/dbus/system_bus_socket"},
		CgroupRoot: cg,
	}
}

func TestNewCohortProofBuildsVerifiableProof(t *testing.T) {
	p, err := NewCohortProof(goodObservation())
	if err != nil {
		t.Fatal(err)
	}
	if p.Members[0].PID != 4200 {
		t.Fatalf("members not sorted by pid: %+v", p.Members)
	}
	rep := Verify(p)
	if !rep.OK() {
		t.Fatalf("own proof does not verify: %v", rep.Err())
	}
	enc, err := Encode(p)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"active_state":"inactive","basis":"empty-observed","boot_id":"` + bootA + `","cgroup":"/user.slice/user-1000.slice/user@1000.service/app.slice/mosaic-engine-conv\\x2d1-exec\\x2d1.scope","cgroup_present":true,"clock_ticks":100,` +
		`"confinement":{"cgroup_root":"/user.slice/user-1000.slice/user@1000.service/app.slice/mosaic-engine-conv\\x2d1-exec\\x2d1.scope","confined":true,` +
		`"masked":["/run/user/1000/bus","/run/user/1000/systemd","/run/user/1000/mosaic","/run/dbus/system_bus_socket"],` +
		`"namespaces":[{"controller":4026531837,"engine":4026532001,"type":"user"},{"controller":4026531841,"engine":4026532002,"type":"mnt"},{"controller":4026531836,"engine":4026532003,"type":"pid"},{"controller":4026531835,"engine":4026532004,"type":"cgroup"}]},` +
		`"conversation":"conv-1","digest":"` + p.Digest + `","execution":"exec-1","invocation_id":"0123456789abcdef0123456789abcdef","members":[{"comm":"node","died_at_ns":60000000100,"pid":4200,"start_time":4000},{"comm":"sh","died_at_ns":60000000000,"pid":4242,"start_time":5000}],"observed_at_ns":60000000500,"observed_wall":"2026-12-02T10:00:00.000000005Z","populated":0,"result":"success","stop":"stop-1","type":"cohort","unit":"mosaic-engine-conv\\x2d1-exec\\x2d1.scope","version":2}`
	if string(enc) != want {
		t.Fatalf("encoding\n got %s\nwant %s", enc, want)
	}
	_, rep, err = VerifyBytes(enc)
	if err != nil || !rep.OK() {
		t.Fatalf("encoded proof: %v %v", err, rep.Err())
	}
}

func TestNewCohortProofRefuses(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Observation)
		want   []error
	}{
		// K2 / mutant 7: the process-group fallback never reaches stopped.
		{"process group (K2)", func(o *Observation) { o.Kind = KindProcessGroup }, []error{ErrProcessGroup}},
		{"empty kind", func(o *Observation) { o.Kind = "" }, []error{ErrProcessGroup}},
		{"incomplete membership", func(o *Observation) { o.MembershipComplete = false }, []error{ErrIncompleteMembership}},
		// K3 / mutant 6: SIGTERM acknowledged while a member lives.
		{"member alive after SIGTERM (K3)", func(o *Observation) { o.Members[1].Died, o.Members[1].DiedAt = false, 0 },
			[]error{ErrDeathUnobserved}},
		{"cgroup absent is not empty (K15)", func(o *Observation) { o.CgroupPresent = false }, []error{ErrCgroupAbsent}},
		{"cgroup populated", func(o *Observation) { o.Populated = 1 }, []error{ErrCgroupPopulated}},
		{"observation before a death", func(o *Observation) { o.ObservedAt = 60_000_000_050 }, []error{ErrObservedBeforeDeath}},
		{"death before start", func(o *Observation) { o.Members[0].DiedAt = 30_000_000_000 }, []error{ErrDeathBeforeStart}},
		{"unit still active", func(o *Observation) { o.ActiveState = "active" }, []error{ErrUnitActive}},
		{"not a scope unit", func(o *Observation) { o.Unit = "engine.service" }, []error{ErrMalformed}},
		{"cgroup of another unit", func(o *Observation) { o.Cgroup = "/user.slice/other.scope" }, []error{ErrMalformed}},
		{"engine sub-cgroup of another unit", func(o *Observation) { o.Cgroup = "/user.slice/other.scope/engine" }, []error{ErrMalformed}},
		{"other sub-cgroup of the unit", func(o *Observation) { o.Cgroup += "/anchor" }, []error{ErrMalformed}},
		{"relative cgroup", func(o *Observation) { o.Cgroup = o.Cgroup[1:] }, []error{ErrMalformed}},
		{"bad boot id", func(o *Observation) { o.BootID = "not-a-boot" }, []error{ErrMalformed}},
		{"bad invocation id", func(o *Observation) { o.InvocationID = "" }, []error{ErrMalformed}},
		{"missing stop reference", func(o *Observation) { o.Stop = "" }, []error{ErrMalformed}},
		{"zero clock ticks", func(o *Observation) { o.ClockTicks = 0 }, []error{ErrMalformed, ErrDeathBeforeStart}},
		{"duplicate member", func(o *Observation) { o.Members[1] = o.Members[0] }, []error{ErrMalformed}},
		// Issue 10 / mutant 12: an engine that ran unconfined never reaches stopped.
		{"unconfined engine", func(o *Observation) { o.Confinement = Confinement{Reason: "user namespaces unavailable"} },
			[]error{ErrUnconfined}},
		{"confinement not recorded", func(o *Observation) { o.Confinement = Confinement{} }, []error{ErrUnconfined}},
		{"engine shares the controller's pid namespace", func(o *Observation) {
			o.Confinement.Namespaces[2].Engine = o.Confinement.Namespaces[2].Controller
		}, []error{ErrUnconfined}},
		{"no cgroup namespace", func(o *Observation) { o.Confinement.Namespaces = o.Confinement.Namespaces[:3] }, []error{ErrUnconfined}},
		{"cgroup view not the cohort's", func(o *Observation) { o.Confinement.CgroupRoot = "/user.slice" }, []error{ErrUnconfined}},
		{"nothing masked", func(o *Observation) { o.Confinement.Masked = nil }, []error{ErrUnconfined}},
		{"read-only path not clean", func(o *Observation) { o.Confinement.ReadOnly = []string{"/h/.pi/agent/../x"} }, []error{ErrUnconfined}},
		{"unknown scope", func(o *Observation) { o.Confinement.Scoped = []string{ScopeAbstractUnix, "everything"} }, []error{ErrUnconfined}},
		{"scoped yet unscoped", func(o *Observation) {
			o.Confinement.Scoped, o.Confinement.Unscoped = []string{ScopeSignal}, "no Landlock"
		}, []error{ErrUnconfined}},
		{"scope listed twice", func(o *Observation) { o.Confinement.Scoped = []string{ScopeSignal, ScopeSignal} }, []error{ErrUnconfined}},
		{"pgroup with everything else wrong", func(o *Observation) {
			o.Kind, o.CgroupPresent, o.Members[0].Died = KindProcessGroup, false, false
		}, []error{ErrProcessGroup, ErrCgroupAbsent, ErrDeathUnobserved}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := goodObservation()
			tt.mutate(&o)
			p, err := NewCohortProof(o)
			if p != nil || err == nil {
				t.Fatalf("built a proof from a bad observation: %+v", p)
			}
			for _, w := range tt.want {
				if !errors.Is(err, w) {
					t.Errorf("error %q does not carry %q", err, w)
				}
			}
		})
	}
}

func TestNewCohortProofEngineSubgroup(t *testing.T) {
	o := goodObservation()
	o.Cgroup += "/" + EngineSubgroup
	o.Confinement.CgroupRoot = o.Cgroup
	p, err := NewCohortProof(o)
	if err != nil {
		t.Fatal(err)
	}
	if rep := Verify(p); !rep.OK() {
		t.Fatal(rep.Err())
	}
}

func TestNewCohortProofEmptyMembership(t *testing.T) {
	// The engine was already gone when the cgroup was frozen: a complete,
	// empty enumeration of a present, empty cgroup still proves the stop.
	o := goodObservation()
	o.Members = nil
	p, err := NewCohortProof(o)
	if err != nil {
		t.Fatal(err)
	}
	enc, _ := Encode(p)
	if !bytes.Contains(enc, []byte(`"members":[]`)) {
		t.Fatalf("empty membership not encoded as []: %s", enc)
	}
}

func TestVerifyDetectsTampering(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*CohortProof)
		failed string
	}{
		{"digest changed", func(p *CohortProof) { p.Digest = strings.Repeat("0", 64) }, "digest"},
		{"member removed", func(p *CohortProof) { p.Members = p.Members[:1] }, "digest"},
		{"populated flipped", func(p *CohortProof) { p.Populated = 1 }, "cgroup-empty"},
		{"absent cgroup", func(p *CohortProof) { p.CgroupPresent = false }, "cgroup-empty"},
		{"observation moved before a death", func(p *CohortProof) { p.ObservedAt = 1 }, "observed-after-deaths"},
		{"confinement flipped", func(p *CohortProof) { p.Confinement.Confined = false }, "confinement"},
		{"confinement dropped", func(p *CohortProof) { p.Confinement = nil }, "confinement"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tamperedProof(t, tt.mutate)
			rep := Verify(p)
			if rep.OK() {
				t.Fatal("tampered proof verifies")
			}
			if !failedCheck(rep, tt.failed) {
				t.Fatalf("check %q did not fail: %+v", tt.failed, rep.Checks)
			}
			if tt.failed != "digest" && !failedCheck(rep, "digest") {
				t.Fatalf("digest still matches after a change")
			}
		})
	}
}

// TestVerifyRefusesRelabelledProof: a proof edited to say more than was
// observed, its digest then recomputed (sha256 of the canonical JSON is no
// signature), fails verification: relabelled to another conversation or
// execution, it names a unit that is not theirs; with a namespace listed
// twice, it would show one identity and hold another.
func TestVerifyRefusesRelabelledProof(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*CohortProof)
		failed string
	}{
		{"conversation relabelled", func(p *CohortProof) { p.Conversation = "conv-2" }, "unit"},
		{"execution relabelled", func(p *CohortProof) { p.Execution = "exec-2" }, "unit"},
		{"unit and ids relabelled, cgroup kept", func(p *CohortProof) {
			p.Conversation, p.Unit = "conv-2", "mosaic-engine-conv\\x2d2-exec\\x2d1.scope"
		}, "cgroup"},
		{"namespace listed twice, the second the controller's", func(p *CohortProof) {
			p.Confinement.Namespaces = append(p.Confinement.Namespaces, Namespace{Type: "pid", Engine: 4026531836, Controller: 4026531836})
		}, "confinement"},
		{"namespace listed twice, identical", func(p *CohortProof) {
			p.Confinement.Namespaces = append(p.Confinement.Namespaces, p.Confinement.Namespaces[0])
		}, "confinement"},
		{"unknown namespace type", func(p *CohortProof) {
			p.Confinement.Namespaces = append(p.Confinement.Namespaces, Namespace{Type: "net", Engine: 1, Controller: 2})
		}, "confinement"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tamperedProof(t, tt.mutate)
			var err error
			if p.Digest, err = digest(p); err != nil {
				t.Fatal(err)
			}
			body, err := Encode(p)
			if err != nil {
				t.Fatal(err)
			}
			_, rep, err := VerifyBytes(body)
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK() {
				t.Fatal("relabelled proof verifies")
			}
			if !failedCheck(rep, tt.failed) || failedCheck(rep, "digest") {
				t.Fatalf("want check %q failed and the digest to hold: %+v", tt.failed, rep.Checks)
			}
		})
	}
}

// tamperedProof is the proof of goodObservation changed by mutate.
func tamperedProof(t *testing.T, mutate func(*CohortProof)) *CohortProof {
	t.Helper()
	p, err := NewCohortProof(goodObservation())
	if err != nil {
		t.Fatal(err)
	}
	mutate(p)
	return p
}

func failedCheck(rep Report, name string) bool {
	for _, c := range rep.Checks {
		if c.Name == name && !c.OK {
			return true
		}
	}
	return false
}

func TestBootProof(t *testing.T) {
	p, err := NewBootProof("conv-1", "exec-1", bootA, bootB, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if rep := Verify(p); !rep.OK() {
		t.Fatal(rep.Err())
	}
	enc, _ := Encode(p)
	want := `{"conversation":"conv-1","current_boot_id":"` + bootB + `","digest":"` + p.Digest + `","execution":"exec-1","observed_wall":"2026-01-02T03:04:05Z","recorded_boot_id":"` + bootA + `","type":"boot","version":1}`
	if string(enc) != want {
		t.Fatalf("got  %s\nwant %s", enc, want)
	}
	for _, tt := range []struct {
		name              string
		recorded, current string
		want              error
	}{
		{"same boot", bootA, bootA, ErrSameBoot},
		{"malformed recorded", "", bootB, ErrMalformed},
		{"malformed current", bootB, strings.ToUpper(bootA), ErrMalformed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewBootProof("c", "e", tt.recorded, tt.current, time.Time{}); !errors.Is(err, tt.want) {
				t.Fatalf("err %v want %v", err, tt.want)
			}
		})
	}
}

// A version 1 proof (written before engines were confined) still decodes,
// its digest and other checks still hold, and it fails verification on one
// check that says why: nothing shows the agent's processes stayed inside.
func TestVersion1ProofFailsOnConfinement(t *testing.T) {
	p, err := NewCohortProof(goodObservation())
	if err != nil {
		t.Fatal(err)
	}
	p.Version, p.Confinement = Version, nil
	if p.Digest, err = Digest(p); err != nil {
		t.Fatal(err)
	}
	enc, err := Encode(p)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(enc, []byte("confinement")) {
		t.Fatalf("a version 1 proof carries confinement: %s", enc)
	}
	_, rep, err := VerifyBytes(enc)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rep.Checks {
		if c.OK != (c.Name != "confinement") {
			t.Errorf("check %s ok=%v (%s)", c.Name, c.OK, c.Detail)
		}
		if c.Name == "confinement" && !strings.Contains(c.Detail, "predates engine confinement") {
			t.Errorf("confinement check does not say why: %s", c.Detail)
		}
	}
	if !errors.Is(rep.Err(), ErrUnconfined) {
		t.Fatalf("err %v, want ErrUnconfined", rep.Err())
	}
	var out bytes.Buffer
	if err := VerifyReader(bytes.NewReader(enc), &out); err == nil || !strings.Contains(out.String(), "FAIL  confinement") {
		t.Fatalf("proof verify of a version 1 proof: %v\n%s", err, out.String())
	}
}

// TestMembersCheckReads: the members check reads as a sentence either
// way: clean when it passes (before, "no duplicate []"), and naming each
// bad member when it fails.
func TestMembersCheckReads(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*CohortProof)
		ok     bool
		detail string
	}{
		{"all well", func(*CohortProof) {}, true, "2 members, each with pid, start time and comm, no duplicate"},
		{"listed twice", func(p *CohortProof) { p.Members[1] = p.Members[0] }, false,
			`2 members; without pid, start time or comm, or listed twice: pid 4200 start 4000 comm "node"`},
		{"no comm", func(p *CohortProof) { p.Members[0].Comm = "" }, false,
			`2 members; without pid, start time or comm, or listed twice: pid 4200 start 4000 comm ""`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := Verify(tamperedProof(t, tc.mutate))
			for _, c := range rep.Checks {
				if c.Name != "members" {
					continue
				}
				if c.OK != tc.ok || c.Detail != tc.detail {
					t.Fatalf("members check ok=%v %q; want ok=%v %q", c.OK, c.Detail, tc.ok, tc.detail)
				}
				return
			}
			t.Fatal("no members check")
		})
	}
}
