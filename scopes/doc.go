// Package scopes launches an engine into its own systemd transient scope
// (over the user bus) and stops it with a proof read from cgroup state.
//
// # Use
//
//	func main() {
//		scopes.MaybeRunHeld() // first thing: held children and anchors re-exec main
//		...
//	}
//
//	m := scopes.NewManager(scopes.Config{Fallback: false})
//	defer m.Close()
//	h, err := m.Launch(ctx, scopes.Spec{Conversation: c, Execution: e, Argv: argv, Resources: r})
//	// h.Stdin / h.Stdout are the engine's pipes; keep h.Stdin open.
//	// Store h.Cohort (JSON) in the writer claim as the execution incarnation.
//	res := h.Stop(ctx, scopes.StopOptions{Stop: ref, Grace: 5 * time.Second})
//	if res.Outcome == scopes.Stopped {
//		proof, err := proofs.NewCohortProof(res.Observation)
//		...
//	}
//	// After a controller restart: m.Reattach(cohort).Stop(ctx, opts).
//
// # Launch, race-free
//
// Launch starts two re-executions of the current executable
// (/proc/self/exe, recognised by MaybeRunHeld): a held child, which blocks
// reading a pipe, and an anchor. It creates the scope with
// StartTransientUnit (PIDs = both, Slice, Description, Delegate=yes,
// CollectMode=inactive-or-failed, TimeoutStopUSec=10s, MemoryMax or
// MemoryMaxScale, TasksMax or TasksMaxScale, CPUQuotaPerSecUSec), waits for the job on a buffered channel
// with a timeout and requires "done", confirms both pids' /proc/<pid>/cgroup
// name the scope, moves them into the scope's sub-cgroups `anchor` and
// `engine`, confirms again, and only then writes the engine's argv and
// environment to the held child's pipe; the child execs the engine. If
// anything fails first, the pipe is closed empty and the child exits 125:
// an engine never runs outside its scope. The engine's pid and start time
// are the held child's (exec keeps both).
//
// # Choices where the issue is silent
//
//   - Delegate=yes and two sub-cgroups. When a scope's cgroup empties,
//     systemd stops the unit and removes the cgroup at once (seen in the
//     sandbox within milliseconds), so a stop that kills everything races
//     systemd for the `populated 0` read, and losing would turn every such
//     stop into an absent observation, that is, uncertain. The anchor (a
//     process that ignores SIGTERM and sleeps) lives in <scope>/anchor and
//     keeps the unit active; the engine and all its descendants live in
//     <scope>/engine, which is the cohort. The kill phase observes
//     <scope>/engine empty while the anchor holds it, then kills the anchor
//     (cgroup.kill on the scope) and waits for the unit to go inactive. A
//     controller that crashes mid-stop leaves the scope in place, so a
//     restart can Reattach and still observe. Cost: one extra small
//     process per execution, and Observation.Cgroup (and the claim's
//     incarnation cgroup) is <unit's ControlGroup>/engine, not the unit's
//     own cgroup; proofs accepts exactly that sub-cgroup.
//   - Slice: app-mosaic.slice (below the user manager's app.slice) unless
//     configured. CollectMode=inactive-or-failed so nothing lingers.
//     DefaultDependencies stays on (the scope stops with the user session).
//   - Resource properties are always passed when set; on a host whose
//     cgroup2 tree has no controllers enabled (hybrid mode, the test
//     sandbox) systemd accepts and does not enforce them.
//   - The user bus is dialled (DBUS_SESSION_BUS_ADDRESS, else
//     $XDG_RUNTIME_DIR/bus) with EXTERNAL auth and Hello, as runc does; the
//     first use also reads the manager's Version so a bus without a user
//     manager is told apart. One connection per Manager, created on first
//     use and redialled once after dbus.ErrClosed. Make one Manager per
//     process; it is the only state (plus the cgroup2 mount handle).
//   - UnitExists: if the held child is already in that unit (a retry after
//     a reconnect), the first start worked; otherwise reset-failed and retry
//     once; then ErrUnitExists.
//   - A start job timeout or failure kills both children and resets the
//     unit if it failed; a scope that starts later has no live pid.
//
// # Stop
//
// TERM phase (Term, or Stop with Grace > 0): SIGTERM to every member of the
// engine cgroup through a pidfd, after checking each is in the cgroup and,
// for the recorded engine pid, that its start time matches (pid reuse:
// not signalled, noted); then wait up to the grace for `populated 0`,
// watching cgroup.events with inotify. Its outcome is `stopping` at best,
// never `stopped`: an acknowledged SIGTERM, EOF, the engine's exit, even an
// empty cgroup seen here prove nothing on their own.
//
// Kill phase (Kill, and always the end of Stop): check the boot id and
// that the unit is still the recorded InvocationID (else the cgroup path
// is not ours: absent), freeze the engine cgroup and wait for `frozen 1`,
// enumerate the complete membership recursively (each pid pinned by a
// pidfd, checked to be in the cgroup, with start time and comm; re-read up
// to three times if a pid vanishes), write cgroup.kill, poll every pidfd
// until each death is observed (its CLOCK_BOOTTIME time recorded), read
// cgroup.events for `populated 0` (the observation time), kill the anchor
// and wait for the unit to be inactive or failed (reset-failed if failed).
// The membership in the observation is the frozen enumeration plus the
// TERM-phase members whose deaths were observed. Outcome `stopped` comes
// from one function (verdict) and needs all of it; anything missing gives
// `uncertain` with the reason. A cgroup that is missing or unreadable
// (ENOENT, ENODEV) is an absent observation, never an empty one. If the
// engine cgroup is not observed empty the anchor is left alive so a later
// stop can observe again.
//
// All cgroup files are opened beneath an O_PATH handle on the cgroup2 mount
// with openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_XDEV); the
// mount is checked for CGROUP2_SUPER_MAGIC.
//
// # Process-group fallback
//
// With Config.Fallback and no user manager, the engine runs in its own
// process group (Cohort.Kind = pgroup, Cohort.Reason says so). The leader
// is pinned by a pidfd for the handle's life, so the pgid can never name
// another group when it is signalled. A child that calls setsid leaves the
// group, so a stop there ends `uncertain`, never `stopped` (K2).
//
// # Open
//
//   - A member can move itself into another cgroup the user owns (same uid
//     can write any cgroup.procs under user@<uid>.service) and so escape the
//     enumeration; a cgroup namespace for the engine (with nsdelegate) would
//     refuse it. Not done here.
//   - Times are CLOCK_BOOTTIME ns; the start time is field 22 of
//     /proc/<pid>/stat in USER_HZ ticks (AT_CLKTCK).
package scopes
