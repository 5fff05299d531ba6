package scopes

// faults are fault points for tests, where a step of the kernel or of
// systemd cannot be made to fail on demand. The zero value injects none.
type faults struct {
	// afterFrozen, if set, fails the kill phase's wait for frozen 1 after
	// the cgroup did report frozen 1.
	afterFrozen func() error
	// afterFreeze, if set, runs right after the kill phase's freeze
	// write, where a tool of the cohort that won the race against the
	// freeze writes 0 to its own cgroup.freeze (same uid, delegated): a
	// race that cannot be won on demand.
	afterFreeze func()
	// whileEmptied, if set, runs between the enumeration of an engine
	// cgroup read empty and the second read of its populated, where a
	// process of the user outside the cohort (a daemon a tool asked)
	// moves one in: a race that cannot be won on demand.
	whileEmptied func()
	// beforeAsk, if set, runs in the kill phase's identity goroutine
	// before the manager is asked which invocation holds the unit, and
	// afterPrefetch once the reads made while the question is out are
	// done: between the two, systemd may end, remove and collect the
	// unit (a restarted controller's stop right after `systemctl kill`),
	// a race that cannot be won on demand.
	beforeAsk     func()
	afterPrefetch func()
	// afterListed, if set, runs right after the kill phase's frozen
	// enumeration, before the read that checks the cgroup stayed frozen;
	// true makes that read report frozen 0, as the kernel does until a
	// task moved in, or woken to die, has frozen or exited: a window of
	// microseconds that cannot be hit on demand.
	afterListed func() (unfrozen bool)
	// afterCgroupKill, if set, runs right after the kill phase's
	// cgroup.kill of the engine cgroup, where a process of the user
	// outside the cohort moves one in: a race that cannot be won on
	// demand.
	afterCgroupKill func()
	// afterKill, if set, fails the kill phase's read of cgroup.events
	// after the enumerated members died, with the scope still frozen.
	afterKill func() error
	// refuseRelease, if set, fails the kill phase's cgroup.kill of the
	// scope (the anchor's) before it is written, as a refused write would.
	refuseRelease func() error
	// refuseHeld, if set, fails the start of a held child (confined: with
	// its namespaces) before the clone, as a kernel that refuses them does.
	refuseHeld func(confined bool) error
	// goAheadClose, if set, is what the close of a held child's release
	// pipe returns once the go-ahead was written, as no close of a pipe
	// on Linux does (the descriptor is let go of either way).
	goAheadClose func() error
}

// frozenWait is the fault at the kill phase's wait for frozen 1.
func (f *faults) frozenWait() error {
	if f.afterFrozen == nil {
		return nil
	}
	return f.afterFrozen()
}

// frozeCohort is the fault right after the kill phase's freeze write.
func (f *faults) frozeCohort() {
	if f.afterFreeze != nil {
		f.afterFreeze()
	}
}

// listedEmptied is the fault between the enumeration of an engine cgroup
// read empty and the second read.
func (f *faults) listedEmptied() {
	if f.whileEmptied != nil {
		f.whileEmptied()
	}
}

// killedCohort is the fault right after the kill phase's cgroup.kill.
func (f *faults) killedCohort() {
	if f.afterCgroupKill != nil {
		f.afterCgroupKill()
	}
}

// killedRead is the fault at the kill phase's read of cgroup.events once
// the members died.
func (f *faults) killedRead() error {
	if f.afterKill == nil {
		return nil
	}
	return f.afterKill()
}

// releaseWrite is the fault at the kill phase's cgroup.kill of the scope.
func (f *faults) releaseWrite() error {
	if f.refuseRelease == nil {
		return nil
	}
	return f.refuseRelease()
}

// heldStart is the fault at the start of a held child.
func (f *faults) heldStart(confined bool) error {
	if f.refuseHeld == nil {
		return nil
	}
	return f.refuseHeld(confined)
}

// askingIdentity is the fault before the kill phase's question on the
// invocation.
func (f *faults) askingIdentity() {
	if f.beforeAsk != nil {
		f.beforeAsk()
	}
}

// prefetchDone is the fault after the reads made while that question is
// out.
func (f *faults) prefetchDone() {
	if f.afterPrefetch != nil {
		f.afterPrefetch()
	}
}

// listedUnfrozen is the fault after the kill phase's frozen enumeration.
func (f *faults) listedUnfrozen() bool {
	return f.afterListed != nil && f.afterListed()
}
