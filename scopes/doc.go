// Package scopes launches an engine into its own systemd transient scope
// (over the user bus) and stops it with a proof read from cgroup state.
//
// # Use
//
//	func main() {
//		scopes.MaybeRunHeld() // first thing: held children re-exec main
//		...
//	}
//
//	m := scopes.NewManager(scopes.Config{Fallback: false})
//	defer m.Close()
//	h, err := m.Launch(ctx, scopes.Spec{Conversation: c, Execution: e, Argv: argv, Resources: r})
//	// h.Stdin / h.Stdout are the engine's stdio (one-way socket pairs, stdio.go); keep h.Stdin open.
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
// Launch starts a held child, a re-execution of the current executable
// (/proc/self/exe, recognised by MaybeRunHeld) which blocks reading a
// pipe, and an anchor (anchorScript). It writes the release (argv,
// environment, confinement plan) to the held child's pipe at once: a
// confined child makes its mount namespace while the scope is created.
// It creates the scope with
// StartTransientUnit (PIDs = both, Slice, Description, Delegate=yes,
// CollectMode=inactive-or-failed, TimeoutStopUSec=10s, MemoryMax or
// MemoryMaxScale, TasksMax or TasksMaxScale, CPUQuotaPerSecUSec), waits for the job on a buffered channel
// with a timeout and requires "done", confirms both pids' /proc/<pid>/cgroup
// name the scope, moves them into the scope's sub-cgroups `anchor` and
// `engine`, confirms again, bounds the scope's cgroup.max.descendants
// (MaxToolCgroups for the tools), and only then writes "placed". The
// child makes its cgroup namespace, rooted where it now is, finishes the
// confinement and reports; the launcher reads the child's namespace
// identities from /proc/<pid>/ns, records the cohort (Spec.BeforeRelease)
// and writes "go"; only then does the engine run. If anything fails first,
// the pipe is closed and the child exits 125: an engine never runs outside
// its scope, nor unconfined when confinement was planned. The cohort's pid
// and start time are the held child's. A launch fails after
// BeforeRelease only if the write of "go" fails, which a pipe does only
// when no process holds its read end (EPIPE: the held child exited without
// reading it, and forks nothing before it), so no engine ran or can: the
// scope is undone, and no handle is owed. Once "go" is written the engine
// is released whatever the pipe's close returns (close(2) lets go of the
// descriptor either way), and Launch returns its handle.
//
// # Confinement
//
// The cgroup is the cohort only if nothing the engine starts can leave it
// or have a process started outside it. A member could otherwise write its
// pid into any cgroup.procs the user owns (all of user@<uid>.service), or
// ask the user manager (systemd-run --user, over the user bus or
// $XDG_RUNTIME_DIR/systemd/private) or a mosaic controller to start one. So
// every engine is confined by construction, set up by the held child
// before the engine runs:
//
//   - The held child is cloned (Go's SysProcAttr; unshare(CLONE_NEWUSER) is
//     refused to a multithreaded process) into new user, mount, pid and
//     IPC namespaces (the last keeps the user's processes' System V IPC
//     out; /dev/shm and /dev/mqueue get the engine's own, privateShm).
//     The user namespace maps only the user's uid and gid to
//     themselves, setgroups denied: what the agent writes keeps the user's
//     ownership, and no other uid exists inside. CAP_SYS_ADMIN in that
//     namespace survives the child's exec as an ambient capability.
//   - On the release, while the scope is made, the child makes
//     every mount private, binds every parent of what it is about to
//     cover that the user could rename onto itself (ancestors.go: a
//     mount point cannot be renamed, so no tool moves ~/.local/state
//     away and forges mosaic's state at the path the controller reads),
//     masks the user bus ($XDG_RUNTIME_DIR/bus and
//     DBUS_SESSION_BUS_ADDRESS's path), the user manager's directory
//     ($XDG_RUNTIME_DIR/systemd), mosaic's runtime directory
//     ($XDG_RUNTIME_DIR/mosaic, the conversation sockets, created if
//     missing so a later controller is masked too) and the system bus
//     socket (privileged daemons act there on a user's request: polkit's
//     allow_active powers off, mounts, installs packages), what the
//     session runs later from the home (managerDirs: units, drop-ins,
//     environment.d, session bus services and autostart entries run
//     outside every cohort at the next reload, login or activation) and
//     every mount of the devtmpfs but /dev (devMounts), with an empty
//     read-only tmpfs over a directory and /dev/null over anything else;
//     puts a /dev of the engine's own in place of the host's (dev.go:
//     only the plain devices, so neither the user's console, sound,
//     camera or security key, nor the FUSE device, whose reader the
//     server never answers outlives SIGKILL: killUnfrozen); puts a private,
//     writable tmpfs in place of the user's tmux and screen server
//     directories (muxDirs: a server there starts processes outside the
//     cohort on request; the engine's own tmux works there); puts one
//     over each of the user's runtime directories too (runtime.go: the
//     editor servers, a terminal's remote control and the container
//     daemons kept there run commands on request; gpg-agent asks the
//     user for a passphrase in a tool's words); mounts a
//     fresh /proc (without it /proc/<outside pid>/root reaches every masked
//     socket through a same-uid process outside, and outside pids could be
//     ptraced). Told it is placed (after the move into <scope>/engine),
//     it unshares a cgroup namespace, rooted at the engine cgroup it
//     now lives in, on its main thread (locked there by this package's
//     init), and mounts cgroup2 from inside it over an empty tmpfs on
//     /sys/fs/cgroup (the same superblock cannot be mounted right on its own
//     root), so the only cgroup.procs files reachable are the engine's
//     subtree's. Other cgroup mounts are masked. nsdelegate is not relied
//     on: the test sandbox mounts cgroup2 without it, and only the mount
//     view stops the move. Last, on the same thread, it enters a Landlock
//     domain that scopes abstract Unix sockets and signals (landlock.go):
//     the network namespace is shared, so only the scope keeps an X11
//     display's abstract socket or a session bus at unix:abstract= out of
//     a tool's reach (the display's file-system sockets in /tmp, PID 1's
//     notification socket and the user's pseudo-terminals are masked or
//     replaced above: displayDirs, systemNotify, privatePTYs).
//     The domain handles no file access, so nothing above is undone or
//     refused by it; a kernel without scopes is reported, not refused.
//   - The engine runs with no capabilities (its uid is not 0 inside and the
//     ambient set is cleared) and no_new_privs (a setuid or file-capability
//     binary gives nothing back), so it cannot unmount anything; in a
//     nested user and mount namespace of its own every inherited mount is
//     locked (MNT_LOCKED), so umount fails there too (tested).
//   - The launcher reads /proc/<pid>/ns/{user,mnt,pid,cgroup} of the held
//     child before the engine runs and compares each with its own; the
//     child reports what it masked and that /proc/self/cgroup reads "/"
//     inside. Cohort.Confinement carries it, the stop's Observation copies
//     it, and proofs refuses a cohort proof without it.
//
// PID 1: the held child stays PID 1 of the engine's pid namespace and
// starts the engine as its child, instead of exec'ing it. PID 1 receives
// only signals it has a handler for (a shell or Node engine would ignore
// the TERM phase's SIGTERM) and inherits every orphan to reap. The held
// child forwards SIGTERM, SIGINT and SIGHUP to the engine, reaps everything,
// and exits with the engine's status (128+N for signal N) the moment the
// engine exits; the kernel then kills the rest of the namespace. So Done
// and ExitErr still mean the engine's exit, Cohort.PID and StartTime are
// the held child's (the process whose exit is the engine's), the engine's
// stdin and stdout are the same socket pairs, and the TERM phase's SIGTERM to
// every member reaches the engine twice (directly and through the held
// child). A tool child does not outlive its engine; a stop still proves
// that only by observation. The one exception is a stop's grace: the TERM
// phase writes its deadline on the held child's stop pipe before it
// signals, and until then the held child sends the SIGTERM to the whole
// namespace and outlives the engine until no child is left, so the tools
// get the grace too (runPID1). Pids that the engine and its tools print are
// pids inside its namespace: Handle.HostPID translates one (tests use it).
//
// Unavailable: a Manager's launches probe the mechanism in a throwaway
// held child that sets everything up and runs nothing (ProbeConfinement,
// also `mosaicctl doctor`) until one probe succeeds, which is kept, and
// remembered for the boot in $XDG_RUNTIME_DIR/mosaic so later controllers
// skip the probe (a launch whose namespaces the kernel then refuses removes
// the mark and probes; the mark never makes an engine run unconfined,
// probemark.go). If the
// kernel refuses (no unprivileged user namespaces, Ubuntu's AppArmor
// restriction, a used-up user.max_user_namespaces, running as root),
// engines launch unconfined
// and Cohort.Confinement says why; Config.NoConfinement does the same on
// purpose (a tool that needs the user bus). Every stop of such an engine
// ends uncertain with the reason, never stopped, exactly like the
// process-group fallback (K2). If the probe passed and a launch's own
// set-up fails, the launch fails (ErrConfinement): never half-confined.
//
// What a tool loses: systemctl --user, systemd-run --user, the user's
// D-Bus (notifications, secret service, …), the system bus (systemctl
// status, loginctl, timedatectl, busctl), the X11 display and any other
// abstract socket bound outside, whatever the user's sessions keep in
// the runtime directory (gpg-agent and ssh-agent there among them: no
// signing with the user's keys), sudo and every other setuid or
// file-capability elevation, ptrace or /proc of any process outside, mounts
// made outside after the launch, other conversations' mosaic sockets,
// and rename(2) or link(2) across the parents kept in place (each is a
// mount of its own: EXDEV; mv copies instead, Go's os.Rename fails).
// docs/security.md lists what confinement does not cover (network,
// abstract sockets on a kernel without Landlock scopes, other daemons,
// files that run later).
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
//     configured. CollectMode=inactive-or-failed so nothing lingers; a
//     stop holds a reference on the unit over the user bus (RefUnit,
//     hold.go) from its first phase to the kill phase's end, so the
//     manager answers the release's question before it collects the unit,
//     not after. DefaultDependencies stays on (the scope stops with the
//     user session).
//   - Resource properties are always passed when set; on a host whose
//     cgroup2 tree has no controllers enabled (hybrid mode, the test
//     sandbox) systemd accepts and does not enforce them. What the held
//     child allocates before its move (its runtime's start, the release's
//     decoding, the kernel's objects for the mounts it makes while the job
//     runs) stays charged to the launcher's cgroup, outside MemoryMax, for
//     the engine's life: bounded by the plan, which the launcher makes;
//     nothing the engine does adds to it.
//   - The user bus is dialled (DBUS_SESSION_BUS_ADDRESS, else
//     $XDG_RUNTIME_DIR/bus) with EXTERNAL auth and Hello, as runc does; the
//     first use also reads the manager's Version so a bus without a user
//     manager is told apart (internal/userbus). One connection per process,
//     shared with the unit verbs and mosaicctl status, created on first use
//     and redialled once after dbus.ErrClosed; a Manager with its own
//     Config.BusAddress owns a private one. Make one Manager per process; it
//     holds no other state than the cgroup2 mount handle and, from its
//     first stop, a connection to the user bus for the references
//     (userbus.Holder: the private socket refuses Ref).
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
// is not ours: absent) and, unless the cgroup at the path has the id
// recorded at launch, that the invocation has not ended (an ended one
// keeps its id while the unit is held or referenced), freeze the scope's
// cgroup (not the engine's, whose
// cgroup.freeze every tool owns and could write 0 to; a frozen ancestor
// keeps it frozen whatever it says) and wait for `frozen 1` (an engine
// cgroup that reads `populated 0` before and after its enumeration,
// emptied by the TERM phase, has no member left to fork and is not frozen:
// the freeze's two cgroup.events notifications would make the kernel defer
// the anchor's `populated 0`, and the unit's end, by up to 10 ms),
// enumerate the complete membership recursively (each pid pinned by a
// pidfd, checked to be in the cgroup, with start time and comm; re-read up
// to three times if a pid vanishes), write cgroup.kill, poll every pidfd
// until each death is observed (its CLOCK_BOOTTIME time recorded), read
// cgroup.events for `populated 0` (the observation time), kill the anchor
// and wait for the unit to be inactive or failed (reset-failed if failed).
// The membership in the observation is the frozen enumeration plus the
// TERM-phase members whose deaths were observed. Outcome `stopped` comes
// from one function (verdict) and needs all of it; anything missing gives
// `uncertain` with the reason. This is the basis `empty-observed`. A
// cgroup that is unreadable is an absent observation, never an empty one.
// If the engine cgroup is not observed empty the anchor is left alive so a
// later stop can observe again. A kill phase that gives up after the
// freeze (no `frozen 1` in time, cgroup.events unreadable, cgroup.kill
// refused, or anything after the kill) thaws the scope on the way out
// (uncertain), as opencontainers/cgroups fs2/freezer.go does on failure:
// an engine left frozen would hold its conversation with nothing left to
// thaw it, and the next stop freezes again anyway. No `frozen 1` in time still writes cgroup.kill
// before the thaw: a task the freezer cannot reach (asleep on a FUSE
// request its own frozen server would answer) would otherwise keep the
// cohort alive through every force stop; the stop stays uncertain, and
// the next one proves the emptied cgroup. After cgroup.kill it makes no
// difference: SIGKILL reaches frozen tasks, and a task with SIGKILL
// pending cannot fork, so a stop that proves leaves the scope frozen until
// the anchor dies with it (a thaw would be one more notification, the one
// that defers the anchor's), and one that ends uncertain thaws it: the
// anchor never stays frozen.
//
// # A scope already removed (basis cgroup-removed)
//
// A scope that systemd stopped and removed (`systemctl --user stop` or
// `kill` of the unit, or an earlier stop of ours whose outcome was never
// recorded) is evidence, not a wall. The kernel refuses to rmdir a
// populated cgroup and cgroup2 has no rename, so once this execution's
// engine cgroup is gone everything that stayed in it has exited, setsid
// tool children included. The kill phase checks, before it freezes
// anything, whether that is the case (findRemoved, removed.go):
//
//   - the user manager's own cgroup (its ControlGroup over D-Bus) must
//     resolve through our cgroup2 handle, so the lookup happens in the view
//     systemd names paths in and an ENOENT is not an artefact of a cgroup
//     namespace or another mount;
//   - nothing at the path (ENOENT) is ours gone; a cgroup at the path whose
//     id (the directory's inode, the kernel's cgroup id, recorded at launch
//     as Cohort.CgroupID) differs is a later cgroup that could only be
//     created after ours went (seen `replaced`); a cgroup with our id, or
//     with no id recorded to compare, is never taken as gone;
//   - our invocation of the unit must be over (the unit gone, another
//     invocation under the name, or ours inactive): a cgroup missing under
//     a running invocation was removed by a process of the user, which can
//     do so only after moving every member elsewhere;
//   - every member known by pid and start time must be observed dead: the
//     engine and the anchor (reaped by this process, pidfd readable, pid
//     gone, or pid now another process's) and each TERM-phase member
//     (pidfd). A member could have moved out before the removal, and the
//     removal says nothing about it; one still alive (after a short window:
//     cgroup_exit runs before exit_notify) is ErrKnownMemberAlive;
//   - the cgroup is looked up again after those deaths: that read is the
//     observation time.
//
// The observation then has Basis cgroup-removed and a proofs.Removal with
// all of it, and verdict says Stopped. What a member started after moving
// itself out of the scope is covered by no proof; only confinement of the
// engine (a cgroup namespace) keeps members in.
//
// # Files
//
// One job each: launch.go (Manager, Launch), launchscope.go (the steps of
// a scope launch: start the children, create the scope, place and
// identify them, undo on failure), properties.go and startunit.go (the
// unit), handshake.go (release, placed, confinement report, record, go),
// held.go,
// confine.go and pid1.go (the held child's side), group.go (the
// process-group fallback), handle.go and cohort.go, stdio.go; stop.go (the
// results, Stop), term.go (the TERM phase), kill.go (the kill phase),
// freeze.go (freeze, enumerate, kill; thaw on failure), removed.go (basis
// cgroup-removed), verdict.go (the one place that says Stopped),
// member.go (pidfd-pinned members), hold.go (the unit held during a
// stop), cgroupfs.go. Tests inject failures
// only where the kernel or systemd cannot be made to fail on demand
// (faults.go).
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
//   - The basis cgroup-removed needs the engine's and the anchor's pids and
//     start times, which only the cohort record (Cohort JSON) keeps: a
//     handle rebuilt from a claim record alone (CohortOf) can prove a
//     running scope empty, not a removed one.
//   - Times are CLOCK_BOOTTIME ns; the start time is field 22 of
//     /proc/<pid>/stat in USER_HZ ticks (AT_CLKTCK).
package scopes
