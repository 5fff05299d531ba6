package scopes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
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
	// inactive); 0 means 10 s.
	KillTimeout time.Duration
}

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

// Term sends SIGTERM to every member through a pidfd (re-checking the
// engine's recorded start time) and waits up to grace for the cgroup's
// populated 0, watching cgroup.events with inotify. It never proves a stop.
func (h *Handle) Term(ctx context.Context, grace time.Duration) TermResult {
	if h.Cohort.Kind == proofs.KindProcessGroup {
		return h.termGroup(ctx, grace)
	}
	c := h.Cohort
	res := TermResult{Outcome: Stopping}
	fs, err := h.m.cgroupFS()
	if err != nil {
		return TermResult{Outcome: Uncertain, Reason: err.Error()}
	}
	// Signal nothing at the path unless it is still our cgroup: after a
	// removal the unit name and the path can belong to someone else.
	if err := h.stillOurs(ctx, fs); err != nil {
		return TermResult{Outcome: Uncertain, Reason: "nothing signalled: " + err.Error()}
	}
	pids, err := fs.procs(c.Cgroup)
	if err != nil {
		if errors.Is(err, ErrCgroupAbsent) {
			return TermResult{Outcome: Uncertain, Reason: err.Error()}
		}
		res.Notes = append(res.Notes, "enumeration for SIGTERM incomplete: "+err.Error())
	}
	h.mu.Lock()
	pinned := map[[2]uint64]*member{}
	for _, m := range h.term {
		pinned[[2]uint64{uint64(m.PID), m.StartTime}] = m
	}
	// Pin every member before signalling any: the held child forwards
	// SIGTERM to the engine and, once the engine exits, the kernel kills
	// the rest of its pid namespace, so a member signalled later in the
	// loop could be gone before it was identified.
	var targets []*member
	for _, pid := range pids {
		var want uint64
		if pid == c.PID {
			want = c.StartTime
		}
		m, err := openMember(pid, want, c.Cgroup)
		if err != nil {
			res.Notes = append(res.Notes, "not signalled: "+err.Error())
			continue
		}
		if old := pinned[[2]uint64{uint64(m.PID), m.StartTime}]; old != nil {
			m.close() // a repeated TERM phase: keep the first pidfd
			m = old
		} else {
			h.term = append(h.term, m)
		}
		targets = append(targets, m)
	}
	for _, m := range targets {
		if err := m.signal(unix.SIGTERM); err != nil {
			res.Notes = append(res.Notes, fmt.Sprintf("SIGTERM pid %d: %v", m.PID, err))
		} else {
			res.Signalled = append(res.Signalled, m.Member)
		}
	}
	h.mu.Unlock()
	_, ok, err := fs.waitEvents(c.Cgroup, deadline(ctx, grace), func(e cgEvents) bool { return e.Populated == 0 })
	if err != nil {
		return TermResult{Outcome: Uncertain, Reason: err.Error(), Signalled: res.Signalled, Notes: res.Notes}
	}
	res.Emptied = ok
	h.mu.Lock()
	waitDeaths(h.term, time.Time{}) // record the deaths seen so far
	h.mu.Unlock()
	return res
}

// Kill runs the kill phase: freeze the engine cgroup and wait for frozen 1,
// enumerate the complete membership recursively (pid, start time, comm,
// each pinned by a pidfd), write cgroup.kill, observe each member's death on
// its pidfd, then read cgroup.events for populated 0 while the anchor still
// holds the scope, then kill the anchor and wait for the unit to go
// inactive. A missing or unreadable cgroup is an absent observation: the
// result is Uncertain.
func (h *Handle) Kill(ctx context.Context, opts StopOptions) StopResult {
	if opts.KillTimeout <= 0 {
		opts.KillTimeout = 10 * time.Second
	}
	if h.Cohort.Kind == proofs.KindProcessGroup {
		return h.killGroup(ctx, opts)
	}
	return h.killScope(ctx, opts)
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

func (h *Handle) killScope(ctx context.Context, opts StopOptions) StopResult {
	c := h.Cohort
	dl := deadline(ctx, opts.KillTimeout)
	res := StopResult{Outcome: Uncertain, Observation: h.baseObservation(opts.Stop)}
	obs := &res.Observation
	uncertain := func(format string, args ...any) StopResult {
		res.Outcome, res.Reason = Uncertain, fmt.Sprintf(format, args...)
		h.fillMembers(obs)
		return res
	}
	boot, err := procfs.BootID()
	if err != nil {
		return uncertain("boot id unreadable: %v", err)
	}
	if boot != c.BootID {
		obs.BootID = boot
		return uncertain("boot id is %s, the cohort ran under %s: its processes are gone, but that needs a boot proof, not a cohort proof", boot, c.BootID)
	}
	fs, err := h.m.cgroupFS()
	if err != nil {
		return uncertain("%v", err)
	}
	// The cgroup path is only this cohort's while the unit is the same
	// invocation; otherwise it is absent for us, and never touched.
	st, err := h.m.bus.unitState(ctx, c.Unit)
	if err != nil {
		return uncertain("unit %s: state unreadable, so its cgroup cannot be tied to invocation %s: %v", c.Unit, c.InvocationID, err)
	}
	if c.InvocationID == "" && st.InvocationID != "" && st.ActiveState == "active" {
		// Reattached from a claim record without the InvocationID
		// (CohortOf): the execution id names one launch only.
		c.InvocationID, obs.InvocationID = st.InvocationID, st.InvocationID
		h.Cohort.InvocationID = st.InvocationID
		res.Notes = append(res.Notes, "invocation id taken from the unit: "+st.InvocationID)
	}
	// Already gone (stopped by someone else, or by a stop whose record
	// was never written): the kernel's removal of the cgroup is then the
	// evidence, once it is shown to be ours that went.
	if _, gone, _ := h.findRemoved(ctx, fs); gone {
		return h.killRemoved(ctx, fs, dl, res)
	}
	if st.InvocationID != c.InvocationID {
		obs.ActiveState, obs.Result = st.ActiveState, st.Result
		return uncertain("unit %s is invocation %q (%s), not %s: the cohort's cgroup is %v", c.Unit, st.InvocationID, st.ActiveState, c.InvocationID, ErrCgroupAbsent)
	}

	// Freeze, so the membership cannot change while it is enumerated.
	if err := fs.write(c.Cgroup, "cgroup.freeze", "1"); err != nil {
		if _, gone, _ := h.findRemoved(ctx, fs); gone && errors.Is(err, ErrCgroupAbsent) {
			return h.killRemoved(ctx, fs, dl, res) // removed under us, just now
		}
		return uncertain("freeze: %v", err)
	}
	_, frozen, err := fs.waitEvents(c.Cgroup, dl, func(e cgEvents) bool { return e.Frozen == 1 })
	if err != nil {
		return uncertain("waiting for frozen 1: %v", err)
	}
	if !frozen {
		_ = fs.write(c.Cgroup, "cgroup.freeze", "0")
		return uncertain("cgroup %s did not report frozen 1 in time: membership cannot be enumerated completely", c.Cgroup)
	}
	ms, complete, notes := h.enumerate(fs, c.Cgroup)
	res.Notes = append(res.Notes, notes...)
	// A member (same uid) could have thawed the cgroup and forked while it
	// was enumerated: the enumeration counts only if it is still frozen.
	if ev, err := fs.events(c.Cgroup); err != nil || ev.Frozen != 1 {
		complete = false
		res.Notes = append(res.Notes, fmt.Sprintf("cgroup not frozen after the enumeration (%+v, %v)", ev, err))
	}
	obs.MembershipComplete = complete

	if err := fs.write(c.Cgroup, "cgroup.kill", "1"); err != nil {
		_ = fs.write(c.Cgroup, "cgroup.freeze", "0")
		return uncertain("cgroup.kill: %v", err)
	}
	if alive := waitDeaths(ms, dl); len(alive) > 0 {
		return uncertain("%d member(s) not observed dead before the deadline, first pid %d", len(alive), alive[0].PID)
	}
	// Every enumerated member is dead. The anchor still holds the scope,
	// so the engine cgroup is still there to be read.
	ev, err := fs.events(c.Cgroup)
	if err != nil {
		return uncertain("cgroup.events after the deaths: %v", err)
	}
	if ev.Populated != 0 {
		// Something we did not enumerate was in the cgroup.
		obs.MembershipComplete = false
		res.Notes = append(res.Notes, "cgroup still populated after every enumerated member died")
		ev, _, err = fs.waitEvents(c.Cgroup, dl, func(e cgEvents) bool { return e.Populated == 0 })
		if err != nil {
			return uncertain("cgroup.events: %v", err)
		}
	}
	obs.ObservedAt, obs.ObservedWall = procfs.BoottimeNanos(), time.Now()
	obs.CgroupPresent, obs.Populated = true, ev.Populated
	obs.Basis = proofs.BasisEmptyObserved
	if ev.Populated == 0 {
		// Release the scope: kill the anchor, then the unit goes inactive.
		st, err := h.releaseScope(ctx, fs, dl)
		obs.ActiveState, obs.Result = st.ActiveState, st.Result
		if err != nil {
			res.Notes = append(res.Notes, err.Error())
		}
	} else {
		res.Notes = append(res.Notes, "scope kept (anchor alive) so the cohort can be observed again")
		obs.ActiveState, obs.Result = st.ActiveState, st.Result
	}
	h.fillMembers(obs)
	res.Outcome, res.Reason = verdict(obs)
	if res.Outcome == Stopped {
		h.closeMembers()
	}
	return res
}

// enumerate lists the frozen cgroup's members, each pinned by a pidfd and
// checked to be inside the cgroup, merged with the TERM phase's members. A
// pid that vanished or was not a member makes it re-read cgroup.procs; the
// membership is complete once a whole read opens cleanly.
func (h *Handle) enumerate(fs *cgroupFS, cg string) ([]*member, bool, []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var notes []string
	key := func(m *member) [2]uint64 { return [2]uint64{uint64(m.PID), m.StartTime} }
	seen := map[[2]uint64]bool{}
	for _, m := range h.term {
		seen[key(m)] = true
	}
	for range 3 {
		pids, err := fs.procs(cg)
		if err != nil {
			notes = append(notes, "enumeration failed: "+err.Error())
			return h.term, false, notes
		}
		clean := true
		for _, pid := range pids {
			m, err := openMember(pid, 0, cg)
			if err != nil {
				notes = append(notes, "enumeration: "+err.Error())
				clean = false
				continue
			}
			if seen[key(m)] {
				m.close()
				continue
			}
			seen[key(m)] = true
			h.term = append(h.term, m)
		}
		if clean {
			return h.term, true, notes
		}
	}
	return h.term, false, notes
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

// releaseScope kills what is left in the scope (the anchor) with the
// scope's cgroup.kill and waits for the unit to be inactive or failed
// (resetting a failed one). A transient unit collected in the meantime
// reads back as inactive with LoadState not-found.
func (h *Handle) releaseScope(ctx context.Context, fs *cgroupFS, dl time.Time) (UnitState, error) {
	c := h.Cohort
	if err := fs.write(c.ScopeCgroup, "cgroup.kill", "1"); err != nil && !errors.Is(err, ErrCgroupAbsent) {
		return UnitState{}, fmt.Errorf("release scope: %w", err)
	}
	wait := time.Millisecond
	for {
		st, err := h.m.bus.unitState(ctx, c.Unit)
		if err == nil && (st.inactive() || (st.InvocationID != "" && st.InvocationID != c.InvocationID)) {
			if st.InvocationID != "" && st.InvocationID != c.InvocationID {
				// A new invocation took the name: ours is gone.
				st = UnitState{LoadState: st.LoadState, ActiveState: "inactive", Result: "unknown"}
			}
			if st.ActiveState == "failed" {
				if err := h.m.bus.resetFailed(ctx, c.Unit); err != nil {
					return st, fmt.Errorf("reset-failed %s: %w", c.Unit, err)
				}
			}
			return st, nil
		}
		if !time.Now().Before(dl) {
			if err != nil {
				return st, fmt.Errorf("unit %s state: %w", c.Unit, err)
			}
			return st, fmt.Errorf("unit %s still %s/%s at the deadline", c.Unit, st.ActiveState, st.SubState)
		}
		time.Sleep(wait)
		wait = min(2*wait, 10*time.Millisecond)
	}
}

// verdict is the one place that says Stopped. It requires, of a scope
// observation: every member's death observed before the observation time,
// the unit inactive or failed, and one of the two bases: complete
// membership and the cgroup present with populated 0 (empty-observed), or
// the cgroup shown removed with every known member's death
// (cgroup-removed).
func verdict(o *proofs.Observation) (Outcome, string) {
	var why []string
	if o.Kind != proofs.KindScope {
		why = append(why, PGroupReason)
	}
	if ok, reason := o.Confinement.Holds(o.Cgroup); !ok {
		why = append(why, reason)
	}
	switch o.Basis {
	case proofs.BasisCgroupRemoved:
		if o.CgroupPresent || o.Removal == nil {
			why = append(why, "cgroup removal not observed")
		} else if o.Removal.Seen == proofs.RemovedReplaced && (o.CgroupID == 0 || o.Removal.SeenCgroupID == o.CgroupID) {
			why = append(why, "the cgroup at the path cannot be told apart from ours")
		} else if len(o.Removal.Known) != 2 {
			why = append(why, "the deaths of the engine and the anchor not both observed")
		}
	default:
		if !o.MembershipComplete {
			why = append(why, "membership not enumerated completely while frozen")
		}
		if !o.CgroupPresent {
			why = append(why, ErrCgroupAbsent.Error())
		} else if o.Populated != 0 {
			why = append(why, fmt.Sprintf("cgroup populated %d", o.Populated))
		}
	}
	for _, m := range o.Members {
		if !m.Died {
			why = append(why, fmt.Sprintf("death of pid %d (%s) not observed", m.PID, m.Comm))
		} else if m.DiedAt > o.ObservedAt {
			why = append(why, fmt.Sprintf("pid %d died after the observation", m.PID))
		}
	}
	if o.ActiveState != "inactive" && o.ActiveState != "failed" {
		why = append(why, fmt.Sprintf("unit %s is %q, not inactive", o.Unit, o.ActiveState))
	}
	if len(why) > 0 {
		return Uncertain, strings.Join(why, "; ")
	}
	return Stopped, ""
}

// pinLeader returns the fallback's engine pinned by a pidfd, opening it
// (with the recorded start time re-checked) if this handle has none yet.
// Caller holds h.mu.
func (h *Handle) pinLeader() (*member, error) {
	if h.leader != nil {
		return h.leader, nil
	}
	m, err := openMember(h.Cohort.PID, h.Cohort.StartTime, "")
	if err != nil {
		return nil, err
	}
	h.leader = m
	return m, nil
}

// signalGroup signals the fallback's process group, only while its leader
// is pinned: a pidfd holds the pid number, so the pgid cannot name another
// group. Caller holds h.mu.
func (h *Handle) signalGroup(sig unix.Signal) error {
	leader, err := h.pinLeader()
	if err != nil {
		return fmt.Errorf("process group %d not signalled: %w", h.Cohort.PID, err)
	}
	if err := unix.Kill(-leader.PID, sig); err != nil {
		return fmt.Errorf("signal %v to process group %d: %w", sig, leader.PID, err)
	}
	return nil
}

// termGroup sends SIGTERM to the fallback's process group. Only the
// engine is identified; the rest of the group cannot be enumerated.
func (h *Handle) termGroup(ctx context.Context, grace time.Duration) TermResult {
	res := TermResult{Outcome: Stopping}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.signalGroup(unix.SIGTERM); err != nil {
		res.Notes = append(res.Notes, err.Error())
		return res
	}
	res.Signalled = append(res.Signalled, h.leader.Member)
	waitDeaths([]*member{h.leader}, deadline(ctx, grace))
	return res
}

func (h *Handle) killGroup(ctx context.Context, opts StopOptions) StopResult {
	res := StopResult{Observation: h.baseObservation(opts.Stop)}
	obs := &res.Observation
	h.mu.Lock()
	if err := h.signalGroup(unix.SIGKILL); err != nil {
		res.Notes = append(res.Notes, err.Error())
	}
	var ms []*member
	if h.leader != nil {
		ms = append(ms, h.leader)
		waitDeaths(ms, deadline(ctx, opts.KillTimeout))
	}
	h.mu.Unlock()
	obs.ObservedAt, obs.ObservedWall = procfs.BoottimeNanos(), time.Now()
	for _, m := range ms {
		obs.Members = append(obs.Members, proofs.MemberObservation{
			PID: m.PID, StartTime: m.StartTime, Comm: m.Comm, Died: m.Died, DiedAt: m.DiedAt,
		})
	}
	// A process group never proves a stop (K2): a setsid child is not in it.
	res.Outcome, res.Reason = Uncertain, PGroupReason
	return res
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
		m, err := openMember(pid, 0, h.Cohort.Cgroup)
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
}

// closeMembers releases the pidfds a stop kept.
func (h *Handle) closeMembers() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range h.term {
		m.close()
	}
	if h.leader != nil {
		h.leader.close()
	}
}
