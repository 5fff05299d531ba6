package scopes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"slices"
	"strconv"
	"time"

	"github.com/mosaic-agents/mosaic/internal/procfs"
	"github.com/mosaic-agents/mosaic/proofs"
	"golang.org/x/sys/unix"
)

// scopeLaunch is one scope launch in progress: what it has started, and
// so what undo must take back if a later step fails.
type scopeLaunch struct {
	m    *Manager
	spec Spec
	fs   *cgroupFS

	pipes       *stdio
	anchor      *exec.Cmd
	anchorReady *os.File // read end of the anchor's ready pipe
	held        *heldChild
	readyBy     time.Time // when the children must be parked in their roles
	unitCreated bool      // a failed launch must reset the unit it made
	cohort      Cohort    // filled in step by step
}

// launchScope runs the steps of a scope launch in order; the first error
// undoes everything, so no engine runs and no unit is left behind.
func (m *Manager) launchScope(ctx context.Context, spec Spec, name string, rel release) (h *Handle, err error) {
	fs, err := m.cgroupFS()
	if err != nil {
		return nil, err
	}
	l := &scopeLaunch{m: m, spec: spec, fs: fs, cohort: Cohort{
		Kind: proofs.KindScope, Conversation: spec.Conversation, Execution: spec.Execution, Unit: name,
	}}
	defer func() {
		l.closeReady()
		if err != nil {
			l.undo(context.WithoutCancel(ctx))
		}
	}()
	if l.pipes, err = newStdio(spec.Stderr); err != nil {
		return nil, err
	}
	confined, why := m.confinementAvailable(ctx)
	if confined, why, err = l.startChildren(ctx, confined, why); err != nil {
		return nil, err
	}
	// The plan is made while the held child's runtime starts, and sent at
	// once: a confined child makes its mounts while the job runs, its
	// cgroup namespace only once told it is placed, and runs the engine
	// only on "go".
	if rel.Confine, err = planIf(confined, spec); err != nil {
		return nil, err
	}
	if err = l.held.sendRelease(rel, time.Now().Add(m.cfg.JobTimeout)); err != nil {
		return nil, fmt.Errorf("release held child %d: %w", l.cohort.PID, err)
	}
	if err = l.createScope(ctx); err != nil {
		return nil, err
	}
	// The invocation is read while the children are placed: both need
	// only the finished job, and it is recorded (BeforeRelease) after both.
	invocation := l.readInvocation(ctx)
	if err = l.placeChildren(ctx); err != nil {
		return nil, err
	}
	if err = l.identify(); err != nil {
		return nil, err
	}
	if err = invocation(); err != nil {
		return nil, err
	}
	// The children started before the scope did and have been starting
	// since: only now must each be parked in its role. Until it is told
	// it is placed the held child runs nothing but its own mounts and its
	// wait, wherever it is moved.
	if err = awaitReady(l.held.ready, roleHeld, l.readyBy); err != nil {
		return nil, fmt.Errorf("held child: %w", err)
	}
	// The held child finishes the confinement now that it is in the
	// engine cgroup (its cgroup namespace is rooted there).
	l.cohort.Confinement, err = l.held.confineScope(rel.Confine != nil, l.cohort.Cgroup, why, time.Now().Add(m.cfg.JobTimeout))
	if err != nil {
		if rel.Confine != nil && !errors.Is(err, ErrCoverPath) {
			m.forgetProbe()
		}
		return nil, fmt.Errorf("launch %s: %w", name, err)
	}
	if rel.Confine != nil {
		m.confirmProbe()
	}
	// The anchor ignores SIGTERM before the engine runs, so before any
	// stop can reach it.
	if err = awaitReady(l.anchorReady, roleAnchor, l.readyBy); err != nil {
		return nil, fmt.Errorf("anchor: %w", err)
	}
	h = l.handle()
	if err = l.held.runEngine(h.Cohort, spec.BeforeRelease); err != nil {
		return nil, fmt.Errorf("launch %s: %w", name, err)
	}
	go h.reap()
	go h.reapAnchor()
	m.reserveFDs()
	return h, nil
}

// planIf computes the confinement plan when engines can be confined here.
func planIf(confined bool, spec Spec) (*confinePlan, error) {
	if !confined {
		return nil, nil
	}
	p, err := planConfinement(spec.Hide...)
	if err != nil {
		return nil, err
	}
	// A runtime directory hides what is below it as a mask does.
	kept, err := keptDirs(append(slices.Clone(spec.Hide), p.Runtime...), spec.Keep)
	if err != nil {
		return nil, err
	}
	p.Keep = append(p.Keep, kept...)
	if p.Devices, err = devicePaths(spec.Devices); err != nil {
		return nil, err
	}
	if p.ReadOnly, p.Writable, err = readOnlyPaths(spec.ReadOnly, spec.Writable); err != nil {
		return nil, err
	}
	// A read-only input is masked wherever else a mount shows it: bound
	// read-only at its own path only, it was writable there.
	masks := maskSet(p.Masks)
	masks.add(aliases(p.mountinfo, p.ReadOnly)...)
	p.Masks = masks
	return &p, nil
}

// startChildren starts the held child (parked, the engine not yet run)
// and the anchor, the held child first: its runtime's start is the
// longer, and the launch waits for it first. It closes this process's
// copies of the child's pipe ends. If the kernel refuses the held child's
// namespaces while the probe's mark was the only evidence they work here,
// it decides as a Manager without the mark does: by a probe of its own,
// whose failure starts the held child unconfined; it returns whether the
// child is confined, and if not why.
func (l *scopeLaunch) startChildren(ctx context.Context, confined bool, why string) (bool, string, error) {
	held, err := l.startHeld(confined)
	if err != nil && confined && errors.Is(err, unix.ENOSPC) {
		// Used up, not refused: a probe now would fail the same way and
		// start the engine unconfined, which is what a tool holding the
		// namespaces would want.
		return false, "", heldStartError(err)
	}
	if err != nil && confined && l.m.forgetProbe() {
		// No scope exists yet, so nothing is undone: the held child is
		// started again, as the probe decides.
		if confined, why = l.m.confinementAvailable(ctx); !confined {
			held, err = l.startHeld(false)
		}
	}
	if err != nil {
		return false, "", err
	}
	l.held = held
	l.pipes.closeChild()
	anchor, ready, err := startAnchor()
	if err != nil {
		return false, "", err
	}
	l.anchor, l.anchorReady = anchor, ready
	l.cohort.AnchorPID, l.cohort.PID = anchor.Process.Pid, held.cmd.Process.Pid
	return confined, why, nil
}

// startHeld starts the held child on the launch's pipes.
func (l *scopeLaunch) startHeld(confined bool) (*heldChild, error) {
	if err := l.m.faults.heldStart(confined); err != nil {
		return nil, err
	}
	h, err := startHeld(l.spec.Dir, l.pipes.inR, l.pipes.outW, l.pipes.errW, confined)
	if err == nil {
		h.closeFault = l.m.faults.goAheadClose
	}
	return h, err
}

// createScope creates the unit with both children in it and waits for its
// start job. Whether each child is parked in its role (MaybeRunHeld is
// wired into main) is read later, right before the child is needed in it:
// the children start while the job runs.
func (l *scopeLaunch) createScope(ctx context.Context) error {
	c := &l.cohort
	props := l.m.properties(l.spec, uint32(c.AnchorPID), uint32(c.PID))
	if err := l.m.startUnit(ctx, c.Unit, props, c.PID); err != nil {
		l.unitCreated = errors.Is(err, ErrJobTimeout) || errors.Is(err, ErrJobFailed)
		return err
	}
	l.unitCreated = true
	l.readyBy = time.Now().Add(l.m.cfg.JobTimeout)
	return nil
}

// readInvocation asks the user manager for the started unit's
// InvocationID in the background and returns the wait for its answer,
// which records it in the cohort. Its answer is the manager's word on the
// invocation, read after the start job is done, as before; nothing reads
// the cohort's InvocationID until the wait has returned.
func (l *scopeLaunch) readInvocation(ctx context.Context) func() error {
	type answer struct {
		id  string
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		id, err := l.m.bus.invocationID(ctx, l.cohort.Unit)
		ch <- answer{id, err}
	}()
	return func() error {
		a := <-ch
		if a.err != nil {
			return fmt.Errorf("scope %s: read InvocationID: %w", l.cohort.Unit, a.err)
		}
		if a.id == "" {
			return fmt.Errorf("%w: scope %s has no InvocationID", ErrNotInScope, l.cohort.Unit)
		}
		l.cohort.InvocationID = a.id
		return nil
	}
}

// placeChildren reads the scope's cgroup from systemd, confirms both
// children are in that cgroup, then moves each into its sub-cgroup and
// confirms again from /proc/<pid>/cgroup: the engine can only ever run in
// <scope>/engine.
func (l *scopeLaunch) placeChildren(ctx context.Context) error {
	c := &l.cohort
	scopeCg, err := l.m.bus.controlGroup(ctx, c.Unit)
	if err != nil {
		return fmt.Errorf("scope %s: read ControlGroup: %w", c.Unit, err)
	}
	if scopeCg == "" || path.Base(scopeCg) != c.Unit {
		return fmt.Errorf("%w: scope %s has ControlGroup %q", ErrNotInScope, c.Unit, scopeCg)
	}
	c.ScopeCgroup, c.Cgroup = scopeCg, path.Join(scopeCg, EngineSubgroup)
	for _, pid := range []int{c.AnchorPID, c.PID} {
		if err := confirmIn(pid, scopeCg); err != nil {
			return err
		}
	}
	if err := l.move(c.AnchorPID, AnchorSubgroup); err != nil {
		return err
	}
	if err := l.move(c.PID, EngineSubgroup); err != nil {
		return err
	}
	return l.boundTree()
}

// MaxToolCgroups bounds the cgroups the engine's tools can make below the
// engine cgroup (a tool owns it: same uid, delegated).
const MaxToolCgroups = 1024

// MaxToolDepth bounds how deep below the engine cgroup they can nest: a
// cgroup's path is rebuilt for every read of /proc/<pid>/cgroup, at a
// cost that grows with its depth, and the web server reads that file of
// every process to find where a peer's socket was made (activation): 4000
// processes in a chain of 1024 cgroups made one such look take 7 s.
const MaxToolDepth = 8

// boundTree sets the scope's cgroup.max.descendants to its two
// sub-cgroups and MaxToolCgroups, and its cgroup.max.depth to the engine
// cgroup's level and MaxToolDepth, before the engine runs. Every stop walks
// the whole tree below the engine cgroup, each cgroup in turn, and more
// than once while frozen: without a bound a tool making cgroups by the
// hundred thousand (as many as the scope's memory holds) would make each
// stop take minutes past its kill timeout. The bound is the scope's,
// outside the cgroup namespace a tool can name, so no tool can raise it;
// the kernel checks every ancestor's bound at each mkdir.
func (l *scopeLaunch) boundTree() error {
	c := &l.cohort
	if err := l.fs.write(c.ScopeCgroup, "cgroup.max.descendants", strconv.Itoa(2+MaxToolCgroups)); err != nil {
		return fmt.Errorf("scope %s: bound its cgroups: %w", c.Unit, err)
	}
	// The engine cgroup is one level below the scope.
	if err := l.fs.write(c.ScopeCgroup, "cgroup.max.depth", strconv.Itoa(1+MaxToolDepth)); err != nil {
		return fmt.Errorf("scope %s: bound its cgroups' depth: %w", c.Unit, err)
	}
	return nil
}

// move puts pid into the scope's sub-cgroup sub and confirms it there.
func (l *scopeLaunch) move(pid int, sub string) error {
	scopeCg, name := l.cohort.ScopeCgroup, l.cohort.Unit
	if err := l.fs.mkdir(scopeCg, sub); err != nil {
		return fmt.Errorf("scope %s: %w", name, err)
	}
	cg := path.Join(scopeCg, sub)
	if err := l.fs.write(cg, "cgroup.procs", fmt.Sprint(pid)); err != nil {
		return fmt.Errorf("scope %s: move pid %d: %w", name, pid, err)
	}
	return confirmIn(pid, cg)
}

// confirmIn checks /proc/<pid>/cgroup names cg exactly.
func confirmIn(pid int, cg string) error {
	if got, err := procfs.Cgroup2(pid); err != nil || got != cg {
		return fmt.Errorf("%w: pid %d in %q (%v), want %s", ErrNotInScope, pid, got, err, cg)
	}
	return nil
}

// identify records what tells this cohort from any later one: the engine
// cgroup's kernel id, the boot, and the start times of the held child and
// the anchor (their pids are ours and unreaped, so these are theirs).
func (l *scopeLaunch) identify() error {
	c := &l.cohort
	id, err := l.fs.id(c.Cgroup)
	if err != nil {
		return fmt.Errorf("scope %s: %w", c.Unit, err)
	}
	held, err := procfs.ReadStat(c.PID)
	if err != nil {
		return fmt.Errorf("held child %d: %w", c.PID, err)
	}
	anchor, err := procfs.ReadStat(c.AnchorPID)
	if err != nil {
		return fmt.Errorf("anchor %d: %w", c.AnchorPID, err)
	}
	boot, err := procfs.BootID()
	if err != nil {
		return err
	}
	c.CgroupID, c.StartTime, c.AnchorStart, c.BootID = id, held.StartTime, anchor.StartTime, boot
	return nil
}

// handle is the launched engine's Handle, its pipes handed over.
func (l *scopeLaunch) handle() *Handle {
	h := newHandle(l.m, l.pipes, l.held, l.cohort)
	h.anchor, h.anchorDone = l.anchor, make(chan struct{})
	return h
}

func (l *scopeLaunch) closeReady() {
	if l.anchorReady != nil {
		l.anchorReady.Close()
	}
}

// undo takes back what a failed launch started: the held child gets EOF
// on its release pipe and is killed (the engine never ran), the anchor is
// killed, so the scope empties; a unit this launch created is reset.
func (l *scopeLaunch) undo(ctx context.Context) {
	if l.held != nil {
		l.held.abort()
	}
	if l.anchor != nil {
		l.anchor.Process.Kill()
		l.anchor.Wait()
	}
	if l.pipes != nil {
		l.pipes.closeAll()
	}
	if l.unitCreated {
		_ = l.m.bus.resetFailed(ctx, l.cohort.Unit)
	}
}
