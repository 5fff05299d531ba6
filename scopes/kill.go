package scopes

import (
	"context"
	"errors"
	"fmt"
	"github.com/mosaic-agents/mosaic/internal/procfs"
	"time"

	"github.com/mosaic-agents/mosaic/proofs"
)

// Kill runs the kill phase: freeze the scope's cgroup and wait for frozen 1
// (unless the engine cgroup is empty already), enumerate the complete
// membership recursively (pid, start time, comm, each pinned by a pidfd),
// write cgroup.kill, observe each member's death on its pidfd, then read
// cgroup.events for populated 0 while the anchor still holds the scope,
// then kill the anchor and wait for the unit to go inactive. A missing or
// unreadable cgroup is an absent observation: the result is Uncertain.
func (h *Handle) Kill(ctx context.Context, opts StopOptions) StopResult {
	if opts.KillTimeout <= 0 {
		opts.KillTimeout = DefaultKillTimeout
	}
	defer h.letKeptGo()
	if h.Cohort.Kind == proofs.KindProcessGroup {
		return h.killGroup(ctx, opts)
	}
	h.holdUnit()
	defer h.letUnitGo()
	return h.killScope(ctx, opts)
}

// killPhase is one kill phase of a scope cohort in progress: each step
// adds to its result, and the first that cannot be observed ends it
// uncertain.
type killPhase struct {
	h      *Handle
	fs     *cgroupFS
	dl     time.Time
	res    StopResult
	frozen bool // the scope is frozen (by this phase, or found so) and is this phase's to thaw
	pre    prefetched
}

// prefetched is what identify reads of the cohort's cgroups while the
// manager's answer is out. It is read only, and used only once the
// answer ties the path to the cohort: the freeze state of a scope that is
// not ours must not make this phase thaw it.
type prefetched struct {
	present     bool // stillPresent
	scopeFrozen bool // scopeFrozen
}

func (k *killPhase) obs() *proofs.Observation { return &k.res.Observation }

func (k *killPhase) note(s string) { k.res.Notes = append(k.res.Notes, s) }

// uncertain ends the phase uncertain, with the members seen so far; the
// anchor is left thawed.
func (k *killPhase) uncertain(format string, args ...any) StopResult {
	k.thaw()
	k.res.Outcome, k.res.Reason = Uncertain, fmt.Sprintf(format, args...)
	k.h.fillMembers(k.obs())
	k.noteGranted()
	return k.res
}

// noteGranted notes each access to the cohort's cgroup files that a tool
// had taken away and the controller restored to read them (grant.go).
func (k *killPhase) noteGranted() {
	if k.fs != nil {
		k.res.Notes = append(k.res.Notes, k.fs.takeGranted(k.h.Cohort.Cgroup)...)
	}
}

// killScope is the kill phase of a scope cohort: identify, then freeze,
// enumerate and kill (freezeKill), observe every death, the cgroup empty
// and the unit inactive.
func (h *Handle) killScope(ctx context.Context, opts StopOptions) StopResult {
	k := &killPhase{h: h, dl: deadline(ctx, opts.KillTimeout),
		res: StopResult{Outcome: Uncertain, Observation: h.baseObservation(opts.Stop)}}
	st, err := k.identify(ctx)
	if err != nil {
		return k.uncertain("%v", err)
	}
	// Already gone (stopped by someone else, or by a stop whose record
	// was never written): the kernel's removal of the cgroup is then the
	// evidence, once it is shown to be ours that went. The cgroup still
	// at the path with the recorded id is not gone (findRemoved would say
	// so too), and knowing it costs no manager round trip.
	if !k.pre.present {
		if _, gone, _ := h.findRemoved(ctx, k.fs); gone {
			return k.killRemoved(ctx)
		}
	}
	c := h.Cohort
	if st.InvocationID != c.InvocationID {
		k.obs().ActiveState, k.obs().Result = st.ActiveState, st.Result
		return k.uncertain("unit %s is invocation %q (%s), not %s: the cohort's cgroup is %v", c.Unit, st.InvocationID, st.ActiveState, c.InvocationID, ErrCgroupAbsent)
	}
	if !k.pre.present && st.inactive() {
		k.obs().ActiveState, k.obs().Result = st.ActiveState, st.Result
		return k.uncertain("unit %s, invocation %s, has ended (%s) and the cgroup at %s is not known to be the one made at launch: the cohort's cgroup is %v", c.Unit, c.InvocationID, st.ActiveState, c.Cgroup, ErrCgroupAbsent)
	}
	ms, err := k.freezeKill(ctx)
	if errors.Is(err, errRemovedUnder) {
		return k.killRemoved(ctx)
	}
	if err != nil {
		return k.uncertain("%v", err)
	}
	if alive := waitDeaths(ms, k.dl); len(alive) > 0 {
		return k.uncertain("%d member(s) not observed dead before the deadline, first pid %d", len(alive), alive[0].PID)
	}
	ev, err := k.awaitEmpty()
	if err != nil {
		return k.uncertain("%v", err)
	}
	return k.observe(ctx, st, ev)
}

// stillPresent says whether the cohort's cgroup is at its path with the
// id recorded at launch. False means only "not known to be present".
func (k *killPhase) stillPresent() bool {
	c := k.h.Cohort
	if c.CgroupID == 0 {
		return false
	}
	id, err := k.fs.id(c.Cgroup)
	return err == nil && id == c.CgroupID
}

// identify ties the cohort's cgroup path to this cohort before anything
// there is touched: the same boot, and the unit's state, which says which
// invocation holds the path. A cohort rebuilt from a claim record without
// the InvocationID (CohortOf) takes the running unit's: the execution id
// names one launch only.
func (k *killPhase) identify(ctx context.Context) (UnitState, error) {
	h := k.h
	c := h.Cohort
	// The question goes out first, and the phase reads what it needs
	// meanwhile (prefetch): the round trip was half a millisecond of a
	// stop with nothing else to do. The reads touch nothing, and nothing
	// read is acted on before the answer.
	asked := make(chan bool, 1)
	go func() {
		h.m.faults.askingIdentity()
		asked <- ourInvocation(ctx, h.m.bus, c)
	}()
	if err := k.prefetch(); err != nil {
		return UnitState{}, err
	}
	h.m.faults.prefetchDone()
	// The cgroup path is only this cohort's while the unit is the same
	// invocation; otherwise it is absent for us, and never touched.
	//
	// The TERM phase asked the same a moment before, and this question is
	// not sent while its wait for populated 0 runs, though that would save
	// the round trip: the answer must postdate the grace. During it our
	// invocation can end (`systemctl --user stop`, the unit failing, the
	// user manager going away) and a new one take the name, and, if a
	// process outlived the stop in the engine cgroup, the very cgroup with
	// its recorded id (TestRemovedIdentity); an earlier answer would let
	// the freeze and cgroup.kill below reach the new invocation's
	// processes while the proof names ours. The anchor's liveness would
	// rule most of that out (a scope's invocation cannot end while its
	// anchor lives, short of the anchor outliving SIGKILL for the stop
	// timeout), but a Reattach handle does not reap the anchor, so the
	// round trip stays, made one (unitState), of one message when the
	// answer is ours (ourInvocation) and the cgroup at the path is the one
	// made at launch (its id, read meanwhile). The id alone does not say
	// the invocation still runs: an ended one keeps it while the unit is
	// held (hold.go) or referenced by anyone, and a path without its id
	// (none recorded, or another cgroup there now) is then anyone's; the
	// whole state says whether it ended (killScope).
	if ours := <-asked; ours && k.pre.present {
		return UnitState{InvocationID: c.InvocationID}, nil
	}
	st, err := h.m.bus.unitState(ctx, c.Unit)
	if err != nil {
		return st, fmt.Errorf("unit %s: state unreadable, so its cgroup cannot be tied to invocation %s: %w", c.Unit, c.InvocationID, err)
	}
	// Read the cgroups again, after the answer: the manager removes a
	// unit's cgroup before it collects the unit, so a unit read gone
	// with its cgroup read present before the answer (a restarted
	// controller's stop right after `systemctl kill`) is a cgroup read
	// too early, which would end the phase uncertain where findRemoved
	// proves the removal.
	k.readCgroups()
	if c.InvocationID == "" && st.InvocationID != "" && st.ActiveState == "active" {
		h.Cohort.InvocationID, k.obs().InvocationID = st.InvocationID, st.InvocationID
		k.note("invocation id taken from the unit: " + st.InvocationID)
	}
	return st, nil
}

// prefetch is what identify does while the manager's answer is out: it
// records the deaths the TERM phase's members showed since (their pidfds
// name them, whoever holds the path), checks the boot, and reads whether
// the cohort's cgroup is still at its path with its id and whether the
// scope is frozen, into k.pre.
func (k *killPhase) prefetch() error {
	h := k.h
	c := h.Cohort
	h.mu.Lock()
	waitDeaths(h.term, time.Time{})
	h.mu.Unlock()
	boot, err := procfs.BootID()
	if err != nil {
		return fmt.Errorf("boot id unreadable: %w", err)
	}
	if boot != c.BootID {
		k.obs().BootID = boot
		return fmt.Errorf("boot id is %s, the cohort ran under %s: its processes are gone, but that needs a boot proof, not a cohort proof", boot, c.BootID)
	}
	if k.fs, err = h.m.cgroupFS(); err != nil {
		return err
	}
	k.readCgroups()
	return nil
}

// readCgroups reads into k.pre whether the cohort's cgroup is still at its
// path with its id and whether the scope is frozen.
func (k *killPhase) readCgroups() {
	k.pre = prefetched{present: k.stillPresent(), scopeFrozen: k.scopeFrozen()}
}

// awaitEmpty reads cgroup.events once every enumerated member is dead. The
// anchor still holds the scope, so the engine cgroup is still there to be
// read; populated 1 now means something was in the cgroup that the
// enumeration missed, and the membership was not complete.
func (k *killPhase) awaitEmpty() (cgEvents, error) {
	cg := k.h.Cohort.Cgroup
	ev, err := k.fs.events(cg)
	if err == nil {
		err = k.h.m.faults.killedRead()
	}
	if err != nil {
		return ev, fmt.Errorf("cgroup.events after the deaths: %w", err)
	}
	if ev.Populated == 0 {
		return ev, nil
	}
	k.obs().MembershipComplete = false
	k.note("cgroup still populated after every enumerated member died")
	ev, _, err = k.fs.waitEvents(cg, k.dl, func(e cgEvents) bool { return e.Populated == 0 })
	if err != nil {
		return ev, fmt.Errorf("cgroup.events: %w", err)
	}
	return ev, nil
}

// observe records the observation proper and releases the scope if the
// cgroup is empty; the verdict then decides.
func (k *killPhase) observe(ctx context.Context, st UnitState, ev cgEvents) StopResult {
	h, obs := k.h, k.obs()
	obs.ObservedAt, obs.ObservedWall = procfs.BoottimeNanos(), time.Now()
	obs.CgroupPresent, obs.Populated = true, ev.Populated
	obs.Basis = proofs.BasisEmptyObserved
	if ev.Populated == 0 {
		// Release the scope: kill the anchor, then the unit goes inactive.
		rst, err := h.releaseScope(ctx, k.fs, k.dl)
		st = rst
		if err != nil {
			k.note(err.Error())
			k.thaw()
		}
	} else {
		k.thaw()
		k.note("scope kept (anchor alive) so the cohort can be observed again")
		if st.ActiveState == "" {
			// identify asked the invocation alone: the observation
			// records the unit's whole state.
			if full, err := h.m.bus.unitState(ctx, h.Cohort.Unit); err == nil {
				st = full
			}
		}
	}
	obs.ActiveState, obs.Result = st.ActiveState, st.Result
	h.fillMembers(obs)
	k.noteGranted()
	k.res.Outcome, k.res.Reason = verdict(obs)
	if k.res.Outcome == Stopped {
		h.releaseMembers()
	}
	return k.res
}

// releaseScope kills what is left in the scope (the anchor) with the
// scope's cgroup.kill and waits for the unit to be inactive or failed
// (resetting a failed one). A transient unit collected in the meantime
// reads back as inactive with LoadState not-found.
func (h *Handle) releaseScope(ctx context.Context, fs *cgroupFS, dl time.Time) (UnitState, error) {
	c := h.Cohort
	if err := h.m.faults.releaseWrite(); err != nil {
		return UnitState{}, fmt.Errorf("release scope: %w", err)
	}
	if err := fs.write(c.ScopeCgroup, "cgroup.kill", "1"); err != nil && !errors.Is(err, ErrCgroupAbsent) {
		return UnitState{}, fmt.Errorf("release scope: %w", err)
	}
	// The unit cannot go inactive before the scope's cgroup is empty, and
	// the manager learns that from the same cgroup.events: wait for the
	// kernel's word first (cheap, no round trip), then ask the manager,
	// instead of asking it again and again while the anchor dies. The
	// wait decides nothing: an unreadable file (the scope already
	// removed) or the deadline leaves it to the manager's answer below.
	_, _, _ = fs.waitEvents(c.ScopeCgroup, dl, func(e cgEvents) bool { return e.Populated == 0 })
	// The manager takes about half a millisecond to act on the same
	// notification, so the first questions follow each other closely:
	// starting the back-off at 1 ms left the answer up to 2 ms late.
	wait := 100 * time.Microsecond
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
