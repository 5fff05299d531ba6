package claims

import (
	"context"
	"path"
	"sync"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/proofs"
	"github.com/mosaic-agents/mosaic/protocol"
)

const (
	bootA = "0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0"
	bootB = "11111111-2222-4333-8444-555555555555"
)

// fakeHost is a machine whose boot id and live processes a test sets.
type fakeHost struct {
	mu    sync.Mutex
	boot  string
	self  Process
	alive map[Process]bool
}

func newHost(pid int) *fakeHost {
	self := Process{BootID: bootA, PID: pid, StartTime: uint64(pid) * 10}
	return &fakeHost{boot: bootA, self: self, alive: map[Process]bool{self: true}}
}

func (h *fakeHost) BootID() (string, error) { h.mu.Lock(); defer h.mu.Unlock(); return h.boot, nil }
func (h *fakeHost) Self() (Process, error)  { h.mu.Lock(); defer h.mu.Unlock(); return h.self, nil }
func (h *fakeHost) Now() time.Time          { return time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC) }
func (h *fakeHost) Alive(p Process) (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p.Cgroup = ""
	return h.alive[p], nil
}

func (h *fakeHost) set(p Process, alive bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p.Cgroup = ""
	h.alive[p] = alive
}

func (h *fakeHost) reboot(boot string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.boot = boot
	h.alive = map[Process]bool{}
	h.self.BootID = boot
	h.alive[h.self] = true
}

func testKeys() Keys {
	return Keys{Seat: SeatKey{Seat: "rocko", Project: "mosaic", Workspace: "/work/main"}, Session: "pi-session-1"}
}

func testRequest(keys Keys) Request {
	return Request{
		Keys: keys, Binding: "binding-1", Harness: "pi", Conversation: "conv-1",
		Branch: "main", Leaf: "leaf-9", Execution: "exec-1",
		Pins: Pins{EngineVersion: "0.85.1", BinarySHA256: "aa", ArgvDigest: "bb"},
	}
}

const testCgroup = "/user.slice/app.slice/mosaic-engine-conv\\x2d1-exec\\x2d1.scope"

func testEngine() Process {
	return Process{BootID: bootA, PID: 4200, StartTime: 4000, Cgroup: testCgroup}
}

func openStore(t *testing.T, root string, h Host, opts ...Option) *Store {
	t.Helper()
	s, err := Open(root, append([]Option{WithHost(h)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// observation is a complete kill-phase observation of rec's engine scope.
func observation(rec Record) proofs.Observation {
	e := rec.Engine
	if e == nil { // launch begun, incarnation unrecorded: the scope is empty
		obs := observation(Record{Conversation: rec.Conversation, Execution: rec.Execution,
			Engine: &Process{BootID: rec.Launcher.BootID, PID: 1, StartTime: 1, Cgroup: testCgroup}})
		obs.Members = nil
		return obs
	}
	// The scope of rec's own ids: a record of another execution than the
	// engine's gets that execution's scope beside the engine's.
	unit, _ := proofs.EngineUnit(rec.Conversation, rec.Execution)
	cg := path.Join(path.Dir(e.Cgroup), unit)
	return proofs.Observation{
		Kind: proofs.KindScope, Stop: "stop-1", Conversation: rec.Conversation, Execution: rec.Execution,
		Unit: unit, InvocationID: "0123456789abcdef0123456789abcdef",
		Cgroup: cg, BootID: e.BootID, ClockTicks: 100, MembershipComplete: true,
		Members: []proofs.MemberObservation{
			{PID: e.PID, StartTime: e.StartTime, Comm: "node", Died: true, DiedAt: 50_000_000_000},
			{PID: e.PID + 7, StartTime: e.StartTime + 1, Comm: "sh", Died: true, DiedAt: 50_000_000_100},
		},
		CgroupPresent: true, Populated: 0, ObservedAt: 50_000_000_200, ActiveState: "inactive", Result: "success",
		Confinement: proofs.Confinement{Confined: true, CgroupRoot: cg, Masked: []string{"/run/user/1000/bus"},
			Namespaces: []proofs.Namespace{{Type: "user", Engine: 2, Controller: 1}, {Type: "mnt", Engine: 2, Controller: 1},
				{Type: "pid", Engine: 2, Controller: 1}, {Type: "cgroup", Engine: 2, Controller: 1}}},
	}
}

func cohortProof(t *testing.T, rec Record) *proofs.CohortProof {
	t.Helper()
	p, err := proofs.NewCohortProof(observation(rec))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if got := protocol.CodeOf(err); got != code {
		t.Fatalf("refusal code %q (err %v), want %q", got, err, code)
	}
}

func mustCurrent(t *testing.T, s *Store, keys Keys) Status {
	t.Helper()
	st, err := s.Current(context.Background(), keys)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// claimIn drives a fresh claim to state (stopped means stopped with a
// cohort proof).
func claimIn(t *testing.T, s *Store, keys Keys, state State) *Claim {
	t.Helper()
	ctx := context.Background()
	c, err := s.Acquire(ctx, testRequest(keys))
	if err != nil {
		t.Fatal(err)
	}
	steps := map[State][]func() error{
		Reserved:  nil,
		Active:    {func() error { return c.BeginLaunch(ctx) }, func() error { return c.Activate(ctx, testEngine()) }},
		Stopping:  {func() error { return c.Activate(ctx, testEngine()) }, func() error { return c.BeginStop(ctx, "force stop") }},
		Uncertain: {func() error { return c.Activate(ctx, testEngine()) }, func() error { return c.MarkUncertain(ctx, "lost") }},
		Stopped: {func() error { return c.Activate(ctx, testEngine()) }, func() error { return c.BeginStop(ctx, "force stop") },
			func() error { return c.Stop(ctx, cohortProof(t, c.Record())) }},
	}
	for _, step := range steps[state] {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	if c.Record().State != state {
		t.Fatalf("claim in %s, want %s", c.Record().State, state)
	}
	return c
}
