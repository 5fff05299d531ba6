package scopes

import (
	"context"
	"errors"
	"os"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mosaic-agents/mosaic/internal/procfs"
	"github.com/mosaic-agents/mosaic/proofs"
)

// Outcome is the state a stop phase leaves the cohort in, as the writer
// claim names it.
type Outcome string

const (
	// Stopping: signals were sent, nothing is proven yet (a TERM phase).
	Stopping Outcome = "stopping"
	// Stopped: the kill phase observed the complete membership, every
	// member's death, the cgroup present with populated 0 and the unit
	// inactive. Only a scope cohort can get here.
	Stopped Outcome = "stopped"
	// Uncertain: the stop could not be proven; Reason says why.
	Uncertain Outcome = "uncertain"
)

// StopOptions bound a stop.
type StopOptions struct {
	// Stop is the stop record's reference, copied into the observation.
	Stop string
	// Grace is how long the TERM phase waits for populated 0; 0 skips the
	// TERM phase (straight to the kill phase).
	Grace time.Duration
	// KillTimeout bounds the kill phase (freeze, deaths, populated 0, unit
	// inactive); 0 means DefaultKillTimeout.
	KillTimeout time.Duration
}

// DefaultKillTimeout bounds a kill phase whose StopOptions set none.
const DefaultKillTimeout = 10 * time.Second

// TermResult is what a TERM phase did. Its Outcome is never Stopped: an
// acknowledged SIGTERM, the engine's exit or even an emptied cgroup seen
// during the grace proves nothing without the kill phase's enumeration.
type TermResult struct {
	Outcome   Outcome  // Stopping, or Uncertain if the cohort cannot be observed
	Reason    string   // why Uncertain
	Signalled []Member // members SIGTERM was delivered to (through a pidfd)
	Emptied   bool     // populated 0 was seen within the grace
	Notes     []string // members not signalled and why (pid reuse, vanished, …)
}

// StopResult is the end of a kill phase (or of Stop).
type StopResult struct {
	Outcome Outcome // Stopped or Uncertain
	Reason  string  // why Uncertain; "" when Stopped
	// Observation is what the kill phase saw, field for field what
	// proofs.NewCohortProof takes. It is filled in even when Uncertain.
	Observation proofs.Observation
	Term        *TermResult // the TERM phase, if Stop ran one
	Notes       []string    // vanished members, pid reuse, anchor release, …
}

// Stop runs the TERM phase (if opts.Grace > 0) and then always the kill
// phase: it returns Stopped only with the kill phase's complete
// observation, Uncertain otherwise.
func (h *Handle) Stop(ctx context.Context, opts StopOptions) StopResult {
	var term *TermResult
	if opts.Grace > 0 {
		t := h.Term(ctx, opts.Grace)
		term = &t
	}
	// An acknowledged SIGTERM proves nothing: the kill phase decides.
	res := h.Kill(ctx, opts)
	res.Term = term
	return res
}

func deadline(ctx context.Context, d time.Duration) time.Time {
	t := time.Now().Add(d)
	if cd, ok := ctx.Deadline(); ok && cd.Before(t) {
		return cd
	}
	return t
}

func (h *Handle) baseObservation(stop string) proofs.Observation {
	c := h.Cohort
	return proofs.Observation{
		Kind:         c.Kind,
		Stop:         stop,
		Conversation: c.Conversation,
		Execution:    c.Execution,
		Unit:         c.Unit,
		InvocationID: c.InvocationID,
		Cgroup:       c.Cgroup,
		CgroupID:     c.CgroupID,
		BootID:       c.BootID,
		ClockTicks:   procfs.ClockTicks(),
		Confinement:  c.Confinement,
	}
}

// fillMembers copies the pinned members into the observation, sorted.
func (h *Handle) fillMembers(obs *proofs.Observation) {
	h.mu.Lock()
	defer h.mu.Unlock()
	obs.Members = make([]proofs.MemberObservation, 0, len(h.term))
	for _, m := range h.term {
		obs.Members = append(obs.Members, proofs.MemberObservation{
			PID: m.PID, StartTime: m.StartTime, Comm: m.Comm, Died: m.Died, DiedAt: m.DiedAt,
		})
	}
	slices.SortFunc(obs.Members, func(a, b proofs.MemberObservation) int { return a.PID - b.PID })
}

// Members enumerates the engine cgroup now (not frozen, so only a
// snapshot): pid, start time and comm of each process.
func (h *Handle) Members() ([]Member, error) {
	if h.Cohort.Kind != proofs.KindScope {
		return nil, errors.New(PGroupReason)
	}
	fs, err := h.m.cgroupFS()
	if err != nil {
		return nil, err
	}
	pids, err := fs.procs(h.Cohort.Cgroup)
	if err != nil {
		return nil, err
	}
	var out []Member
	for _, pid := range pids {
		m, err := openMember(pid, 0, h.Cohort.engineCgroup())
		if err != nil {
			continue
		}
		out = append(out, m.Member)
		m.close()
	}
	return out, nil
}

// Abandon kills everything in the cohort, anchor included, without
// observing anything: for cleanup after a failure, never a stop.
func (h *Handle) Abandon(ctx context.Context) error {
	c := h.Cohort
	if c.Kind == proofs.KindProcessGroup {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.signalGroup(unix.SIGKILL)
	}
	fs, err := h.m.cgroupFS()
	if err != nil {
		return err
	}
	err = fs.write(c.ScopeCgroup, "cgroup.kill", "1")
	if errors.Is(err, ErrCgroupAbsent) {
		err = nil
	}
	_ = h.m.bus.resetFailed(ctx, c.Unit)
	h.letUnitGo()
	return err
}

// Close releases the handle's descriptors: the engine's pipes and the
// pidfds a stop kept. Call it after a stop. Closing the engine's stdin
// earlier is not a stop: it only makes Pi exit, and its children may live.
func (h *Handle) Close() {
	for _, f := range []*os.File{h.Stdin, h.Stdout, h.Stderr} {
		if f != nil {
			f.Close()
		}
	}
	h.closeMembers()
	h.letUnitGo()
	h.letKeptGo()
}

// closeMembers releases the pidfds a stop kept.
func (h *Handle) closeMembers() {
	closeFDs(h.takeMemberFDs())
}

// releaseMembers releases the pidfds a proven stop kept, after it returns:
// each close of a reaped process's last pidfd frees its pid and pidfs
// inode, about 2.5 µs, and a 201-member cohort's took 0.5 ms of a stop
// that needs none of them once the verdict is in. The descriptors are
// the handle's no more when it returns (a later signal says the pidfd
// is closed), so nothing can use a number the closer is about to free.
func (h *Handle) releaseMembers() {
	if fds := h.takeMemberFDs(); len(fds) > 0 {
		go closeFDs(fds)
	}
}

// takeMemberFDs takes the pidfds of the members and the leader from
// the handle, marking each closed.
func (h *Handle) takeMemberFDs() []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	var fds []int
	take := func(m *member) {
		if m != nil && m.fd >= 0 {
			fds = append(fds, m.fd)
			m.fd = -1
		}
	}
	for _, m := range h.term {
		take(m)
	}
	take(h.leader)
	return fds
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}
