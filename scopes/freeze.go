package scopes

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// errRemovedUnder: the cohort's cgroup was removed between the check and
// the freeze; the kill phase goes on as for a cgroup found removed.
var errRemovedUnder = errors.New("cgroup removed before the freeze")

// errNotFrozen: the cohort did not report frozen 1 by the deadline.
var errNotFrozen = errors.New("did not report frozen 1 in time")

// freezeKill freezes the scope's cgroup, enumerates the engine cgroup's
// membership while frozen and kills it with cgroup.kill. The scope's, not
// the engine's: every tool owns the engine cgroup's files (same uid,
// delegated) and can write 0 to its cgroup.freeze, which thaws a freeze
// of that cgroup (a tool that wins the race against the freeze denies the
// stop, or makes it wait for its deadline), while a frozen ancestor keeps
// every descendant frozen whatever their own cgroup.freeze says, and the
// scope's cgroup lies outside the cgroup namespace a tool can name. The
// anchor, frozen too, still dies to the scope's cgroup.kill. The wait for
// frozen 1 reads the engine cgroup's cgroup.events, which reports the
// freeze it inherits: the anchor's own freezing is not waited for.
//
// An engine cgroup a TERM phase already emptied is not frozen at all
// (enumerateEmptied): with no member left nothing can fork, and a freeze
// and thaw of the scope would only be two more cgroup.events
// notifications, after which the kernel defers the next one, the
// anchor's populated 0 that the user manager ends the unit on, by up to
// 10 ms.
//
// The scope stays frozen when freezeKill returns. Once cgroup.kill is
// written, frozen or not makes no difference (SIGKILL reaches frozen
// tasks), and a thaw here would be the notification that defers the
// anchor's: the anchor dies frozen when the scope is released
// (releaseScope). A kill phase that ends uncertain, after an error here
// or later, thaws the scope (uncertain, observe), as opencontainers/cgroups
// fs2/freezer.go does on failure: it leaves the engine as it found it, not
// frozen for good with nothing left to thaw it; only a cohort that never
// froze is killed first (killUnfrozen).
func (k *killPhase) freezeKill(ctx context.Context) ([]*member, error) {
	// A scope found frozen (by a kill phase whose controller died before
	// it released or thawed the scope, or by the user) is this phase's to
	// thaw if it ends uncertain: the emptied path does not freeze it
	// again, and a frozen anchor would hold the scope for good.
	k.frozen = k.pre.scopeFrozen
	if ms, ok := k.enumerateEmptied(); ok {
		return ms, k.killEngine()
	}
	// Frozen, the membership cannot change while it is enumerated.
	if err := k.fs.write(k.h.Cohort.freezeCgroup(), "cgroup.freeze", "1"); err != nil {
		if _, gone, _ := k.h.findRemoved(ctx, k.fs); gone && errors.Is(err, ErrCgroupAbsent) {
			return nil, errRemovedUnder
		}
		return nil, fmt.Errorf("freeze: %w", err)
	}
	k.frozen = true
	k.h.m.faults.frozeCohort()
	if err := k.awaitFrozen(); err != nil {
		if errors.Is(err, errNotFrozen) {
			k.killUnfrozen()
		}
		return nil, err
	}
	ms := k.enumerateFrozen()
	if err := k.killEngine(); err != nil {
		return nil, err
	}
	return ms, nil
}

// killEngine writes cgroup.kill to the engine cgroup: every member gets
// SIGKILL, and a task with a fatal signal pending cannot fork.
func (k *killPhase) killEngine() error {
	if err := k.fs.write(k.h.Cohort.Cgroup, "cgroup.kill", "1"); err != nil {
		return fmt.Errorf("cgroup.kill: %w", err)
	}
	k.h.m.faults.killedCohort()
	return nil
}

// awaitFrozen waits for cgroup.events to report frozen 1: until then a
// member can still fork, and the enumeration would not be complete. For a
// cgroup that emptied after enumerateEmptied looked, the wait is one
// read: the scope's write sets frozen 1 on a descendant without tasks
// (cgroup_freeze calls cgroup_do_freeze on each, which updates its state
// at once), and waitEvents reads before it waits. The read stays, since
// it is what shows the freeze took.
func (k *killPhase) awaitFrozen() error {
	cg := k.h.Cohort.Cgroup
	_, frozen, err := k.fs.waitEvents(cg, k.dl, func(e cgEvents) bool { return e.Frozen == 1 })
	if err == nil {
		err = k.h.m.faults.frozenWait()
	}
	if err != nil {
		return fmt.Errorf("waiting for frozen 1: %w", err)
	}
	if !frozen {
		return fmt.Errorf("cgroup %s %w: membership cannot be enumerated completely", cg, errNotFrozen)
	}
	return nil
}

// killUnfrozen writes cgroup.kill to a cohort that did not freeze by the
// deadline. A task asleep in the kernel where the freezer cannot reach it
// never freezes, so no stop could ever enumerate the cohort; left
// unkilled, that one task would keep every member alive through every
// force stop. A tool's read of a FUSE mount that another tool serves is
// one (TestKillPhaseKillsAFUSEReader, seen on Linux 6.18, in an unconfined
// engine: the confinement masks /dev/fuse, see below): the freeze
// wakes the reader's interruptible wait for the answer, the kernel sends
// the server an INTERRUPT and the reader waits on, killable (state D in
// request_wait_answer), while the server freezes; the engine cgroup
// stays frozen 0. The kill proves nothing (the membership was never
// enumerated, the stop ends uncertain). SIGKILL ends the killable wait,
// after which the reader waits out, uninterruptibly, the request the
// server had taken; the server dies of the same cgroup.kill, its
// /dev/fuse closes, the connection ends and the reader dies, and the
// next stop finds the cgroup empty and can prove that. A reader that
// holds that /dev/fuse itself (a thread of the server, a child that
// inherited the descriptor) keeps the connection, and so itself, alive
// after SIGKILL: the cgroup stays populated until the connection is
// aborted (fusectl's abort, a forced unmount), which no stop does. That
// is why a confined engine gets no FUSE device (planConfinement masks
// /dev/fuse, TestConfinedToolCannotReachFUSE): its tools can neither open
// the device nor mount FUSE, in a nested user namespace neither. Only an
// unconfined engine's tools can, and its stops are never stopped anyway.
func (k *killPhase) killUnfrozen() {
	if err := k.killEngine(); err != nil {
		k.note("without the freeze: " + err.Error())
		return
	}
	k.note("cgroup.kill written without the freeze: the cohort never reported frozen 1, so its membership is unknown")
}

// listTries bounds the frozen enumerations of one kill phase.
const listTries = 3

// enumerateFrozen enumerates the engine cgroup under the frozen scope.
// The enumeration counts as complete only if the engine cgroup still
// reports frozen 1 after: nothing of the cohort can thaw the scope, but
// the user (or the user manager) can. Frozen 0 with the scope's freeze
// still in force is a task that has not frozen yet: one the kernel woke
// to die (the held child ended the pid namespace under the freeze, a kill
// phase that began a hold's length past the grace, holdPastGrace), or one
// moved in from outside the cohort. The phase then waits for frozen 1
// again and enumerates again, which merges into the membership already
// pinned, so the enumeration that counts is again one between two reads
// of frozen 1. A scope thawed (its cgroup.freeze 0) ends it at once.
func (k *killPhase) enumerateFrozen() []*member {
	cg := k.h.Cohort.Cgroup
	for try := 1; ; try++ {
		ms, complete, notes := k.h.enumerate(k.fs, k.h.Cohort.engineCgroup())
		k.res.Notes = append(k.res.Notes, notes...)
		ev, err := k.fs.events(cg)
		if err == nil && k.h.m.faults.listedUnfrozen() {
			ev.Frozen = 0
		}
		if err == nil && ev.Frozen == 1 {
			k.obs().MembershipComplete = complete
			return ms
		}
		k.note(fmt.Sprintf("cgroup not frozen after the enumeration (%+v, %v)", ev, err))
		if err != nil || try == listTries || !k.scopeFrozen() {
			k.obs().MembershipComplete = false
			return ms
		}
		if err := k.awaitFrozen(); err != nil {
			k.note(err.Error())
			k.obs().MembershipComplete = false
			return ms
		}
	}
}

// enumerateEmptied enumerates an engine cgroup that reads populated 0
// before and after, without the freeze: no member was left to fork
// meanwhile. A process moved in from outside the cohort between the reads
// would be seen by the second; the freeze would not have kept it out
// either. It reports false, leaving the cohort to the frozen path, when
// the cgroup is populated or the enumeration was not clean.
func (k *killPhase) enumerateEmptied() ([]*member, bool) {
	cg := k.h.Cohort.Cgroup
	if !k.emptied(cg) {
		return nil, false
	}
	ms, complete, notes := k.h.enumerate(k.fs, k.h.Cohort.engineCgroup())
	k.h.m.faults.listedEmptied()
	if !complete || !k.emptied(cg) {
		return nil, false
	}
	k.res.Notes = append(k.res.Notes, notes...)
	k.obs().MembershipComplete = true
	return ms, true
}

// emptied says whether cg's cgroup.events reads populated 0.
func (k *killPhase) emptied(cg string) bool {
	ev, err := k.fs.events(cg)
	return err == nil && ev.Populated == 0
}

// scopeFrozen says whether the scope's cgroup.freeze reads 1.
func (k *killPhase) scopeFrozen() bool {
	b, err := k.fs.read(k.h.Cohort.freezeCgroup(), "cgroup.freeze")
	return err == nil && strings.TrimSpace(string(b)) == "1"
}

// thaw undoes the kill phase's freeze, if it froze the scope.
func (k *killPhase) thaw() {
	if !k.frozen {
		return
	}
	k.frozen = false
	if err := k.fs.write(k.h.Cohort.freezeCgroup(), "cgroup.freeze", "0"); err != nil {
		k.note("thaw: " + err.Error())
	}
}

// enumerate lists the frozen cgroup's members, each pinned by a pidfd and
// checked to be inside the cgroup, merged with the TERM phase's members. A
// pid that vanished or was not a member makes it re-read cgroup.procs; the
// membership is complete once a whole read opens cleanly.
func (h *Handle) enumerate(fs *cgroupFS, cg cgroupRef) ([]*member, bool, []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var notes []string
	seen := map[[2]uint64]bool{}
	for _, m := range h.term {
		seen[identity(m)] = true
	}
	for range 3 {
		pids, err := fs.procs(cg.Path)
		if err != nil {
			notes = append(notes, "enumeration failed: "+err.Error())
			return h.term, false, notes
		}
		// Pinned in parallel, as in the TERM phase: one member's system
		// calls need nothing of another's, and the cgroup is frozen.
		pinned := make([]pinResult, len(pids))
		inParallel(len(pids), func(i int) { pinned[i].m, pinned[i].err = openMember(pids[i], 0, cg) })
		clean := true
		for _, p := range pinned {
			m, err := p.m, p.err
			if err != nil {
				notes = append(notes, "enumeration: "+err.Error())
				clean = false
				continue
			}
			if seen[identity(m)] {
				m.close()
				continue
			}
			seen[identity(m)] = true
			h.term = append(h.term, m)
		}
		if clean {
			return h.term, true, notes
		}
	}
	return h.term, false, notes
}
