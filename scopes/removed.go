package scopes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/mosaic-agents/mosaic/internal/procfs"
	"github.com/mosaic-agents/mosaic/proofs"
	"golang.org/x/sys/unix"
)

// ErrKnownMemberAlive: a member known by pid and start time is alive
// although the cohort's cgroup was removed, so it left the cgroup before
// the removal and the removal says nothing about it.
var ErrKnownMemberAlive = errors.New("known member alive outside its removed cgroup")

// id returns the kernel id of a cgroup: the inode number of its directory
// on cgroup2, which the kernel never gives to another cgroup during one
// boot. A missing cgroup is ErrCgroupAbsent.
func (c *cgroupFS) id(cgroup string) (uint64, error) {
	fd, err := c.open(cgroup, "", unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, classify(path.Join(c.mount, cgroup), "fstat", err)
	}
	return st.Ino, nil
}

// managerCgroup is the user manager's own cgroup (its ControlGroup).
func (b bus) managerCgroup(ctx context.Context) (string, error) {
	var cg string
	err := b.do(ctx, func(c *sddbus.Conn) error {
		v, err := c.GetManagerProperty("ControlGroup")
		if err != nil {
			return err
		}
		if cg, err = strconv.Unquote(v); err != nil {
			return fmt.Errorf("manager ControlGroup %q: %w", v, err)
		}
		return nil
	})
	return cg, err
}

// findRemoved tells whether this cohort's cgroup is gone, with the
// identity checks that make that safe to say:
//
//   - the user manager's own cgroup resolves through our cgroup2 handle,
//     so the lookup is made in the view systemd names paths in and an
//     ENOENT is not an artefact of another cgroup namespace or mount;
//   - nothing at the path (ENOENT): ours is gone, since cgroup2 has no
//     rename and its directory can only go by rmdir, which the kernel
//     refuses while anything lives in it;
//   - a cgroup at the path whose id is not the one recorded at launch: a
//     new cgroup took the path, which it can only do after ours went;
//   - a cgroup at the path with our id, or with no id recorded to compare:
//     not gone (it may be ours).
//
// A non-nil error means it cannot be told.
func (h *Handle) findRemoved(ctx context.Context, fs *cgroupFS) (*proofs.Removal, bool, error) {
	c := h.Cohort
	mc, err := h.m.bus.managerCgroup(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("user manager's cgroup unreadable: %w", err)
	}
	if mc == "" || !descends(c.Cgroup, mc) {
		return nil, false, fmt.Errorf("cgroup %s is not below the user manager's cgroup %q", c.Cgroup, mc)
	}
	if _, err := fs.id(mc); err != nil {
		return nil, false, fmt.Errorf("the user manager's cgroup %s is not visible through %s, so an absent path there proves nothing: %w", mc, fs.mount, err)
	}
	rm := &proofs.Removal{ManagerCgroup: mc, Known: []proofs.KnownDeath{}}
	id, err := fs.id(c.Cgroup)
	switch {
	case errors.Is(err, ErrCgroupAbsent) && errors.Is(err, unix.ENOENT):
		rm.Seen = proofs.RemovedENOENT
		return rm, true, nil
	case err != nil:
		return nil, false, err
	case c.CgroupID != 0 && id != c.CgroupID:
		rm.Seen, rm.SeenCgroupID = proofs.RemovedReplaced, id
		return rm, true, nil
	}
	return nil, false, nil
}

// unitOurs and cgroupOurs say whether the cohort's cgroup may be touched
// (Term): the unit is still the recorded invocation, and, when its id was
// recorded, the cgroup at the path is the one created at launch. unitOurs
// asks the user manager. The invocation's id alone is enough only with
// the cgroup's id for cgroupOurs to check after it: an ended invocation
// keeps its id while the unit is held (hold.go) or referenced by anyone,
// so without a cgroup id the whole state must say it has not ended.
func (h *Handle) unitOurs(ctx context.Context) error {
	c := h.Cohort
	if c.CgroupID != 0 && ourInvocation(ctx, h.m.bus, c) {
		return nil
	}
	st, err := h.m.bus.unitState(ctx, c.Unit)
	if err != nil {
		return fmt.Errorf("unit %s: state unreadable: %w", c.Unit, err)
	}
	if c.InvocationID != "" && st.InvocationID != c.InvocationID {
		return fmt.Errorf("unit %s is invocation %q, not %s: %w", c.Unit, st.InvocationID, c.InvocationID, ErrCgroupAbsent)
	}
	if c.CgroupID == 0 && st.inactive() {
		return fmt.Errorf("unit %s has ended (%s) and no cgroup id was recorded to tell its cgroup from another at %s: %w", c.Unit, st.ActiveState, c.Cgroup, ErrCgroupAbsent)
	}
	return nil
}

// ourInvocation says whether the manager names the cohort's recorded
// invocation as the unit's: the one property that ties the path to the
// cohort, asked alone. Anything else (another id, none recorded, no
// answer) is asked again with the unit's whole state, which says why.
func ourInvocation(ctx context.Context, b bus, c Cohort) bool {
	if c.InvocationID == "" {
		return false
	}
	inv, err := b.invocationID(ctx, c.Unit)
	return err == nil && inv == c.InvocationID
}

// cgroupOurs looks at the cgroup: the one at the path has the id recorded
// at launch (nothing to compare when none was recorded).
func (h *Handle) cgroupOurs(fs *cgroupFS) error {
	c := h.Cohort
	if c.CgroupID == 0 {
		return nil
	}
	id, err := fs.id(c.Cgroup)
	if err != nil {
		return err
	}
	if id != c.CgroupID {
		return fmt.Errorf("cgroup %s has id %d, not %d: %w", c.Cgroup, id, c.CgroupID, ErrCgroupAbsent)
	}
	return nil
}

func descends(cg, ancestor string) bool {
	return len(cg) > len(ancestor) && cg[:len(ancestor)] == ancestor && (ancestor == "/" || cg[len(ancestor)] == '/')
}

// killRemoved ends a kill phase whose cohort cgroup is already gone (the
// scope stopped or killed by someone else, `systemctl --user stop`, or a
// stop whose release ran but whose record was never written). The kernel
// emptied the cgroup before removing it, so every process that stayed in
// it is dead, known or not. What is left to observe: that our invocation
// of the unit is over (systemd removed the cgroup, not a process of the
// user); that every member known by pid and start time (the engine, the
// anchor, each TERM-phase member) is dead too, since one could have left
// the cgroup before it went; and, after all that, that the cgroup is
// still gone. Anything missing is uncertain.
func (k *killPhase) killRemoved(ctx context.Context) StopResult {
	c := k.h.Cohort
	obs := k.obs()
	obs.Basis, obs.CgroupPresent, obs.Populated = proofs.BasisCgroupRemoved, false, 0
	st, err := k.removedBySystemd(ctx)
	if err != nil {
		return k.uncertain("%v", err)
	}
	known, err := k.awaitKnownDeaths()
	if err != nil {
		return k.uncertain("%v", err)
	}
	// The observation proper, after every death: the cgroup is still gone.
	rm, gone, err := k.h.findRemoved(ctx, k.fs)
	if err != nil || !gone {
		return k.uncertain("cgroup %s no longer observed removed (%v)", c.Cgroup, err)
	}
	obs.ObservedAt, obs.ObservedWall = procfs.BoottimeNanos(), time.Now()
	rm.Known = known
	rm.UnitLoadState, rm.UnitActiveState, rm.UnitInvocationID = st.LoadState, st.ActiveState, st.InvocationID
	obs.Removal = rm
	obs.ActiveState, obs.Result = invocationEnd(st, c.InvocationID)
	k.h.fillMembers(obs)
	k.res.Outcome, k.res.Reason = verdict(obs)
	if k.res.Outcome == Stopped {
		k.h.releaseMembers()
	}
	return k.res
}

// removedBySystemd reads the unit's state and refuses a removal made while
// our invocation still runs. systemd removes a unit's cgroups when the unit
// stops; our invocation running without its engine cgroup means a process
// of the user removed it, which it can do only after moving every member
// elsewhere: that proves nothing.
func (k *killPhase) removedBySystemd(ctx context.Context) (UnitState, error) {
	c := k.h.Cohort
	st, err := k.h.m.bus.unitState(ctx, c.Unit)
	if err != nil {
		return st, fmt.Errorf("unit %s: state unreadable: %w", c.Unit, err)
	}
	if st.InvocationID == c.InvocationID && !st.inactive() {
		k.obs().ActiveState, k.obs().Result = st.ActiveState, st.Result
		return st, fmt.Errorf("cgroup %s is gone while unit %s is still our invocation (%s): not a removal systemd made; the members may have moved elsewhere first",
			c.Cgroup, c.Unit, st.ActiveState)
	}
	return st, nil
}

// awaitKnownDeaths observes the death of every member known by pid and
// start time: each TERM-phase member, then the engine and the anchor. One
// alive left the cgroup before it went, so the removal says nothing of it.
func (k *killPhase) awaitKnownDeaths() ([]proofs.KnownDeath, error) {
	h, cg := k.h, k.h.Cohort.Cgroup
	h.mu.Lock()
	alive := waitDeaths(h.term, k.dl)
	h.mu.Unlock()
	if len(alive) > 0 {
		return nil, fmt.Errorf("cgroup %s removed, but pid %d, signalled in the TERM phase, is alive: %w", cg, alive[0].PID, ErrKnownMemberAlive)
	}
	known, err := h.knownDeaths(k.dl)
	if err != nil {
		return nil, fmt.Errorf("cgroup %s removed, but %w", cg, err)
	}
	return known, nil
}

// invocationEnd is the unit's state as the observation records it. Once
// our invocation is over the unit is gone (not-found reads inactive) or the
// name belongs to another invocation, whose result is not ours.
func invocationEnd(st UnitState, invocation string) (active, result string) {
	switch {
	case st.InvocationID == invocation:
		return st.ActiveState, st.Result
	case st.InvocationID != "":
		return "inactive", "unknown"
	}
	return "inactive", st.Result
}

// knownDeaths observes the death of the engine and the anchor, the two
// members known by pid and start time. A member this process launched is
// dead once reaped; any other (after Reattach) is dead if its pidfd polls
// readable, if no process has its pid, or if its pid now names a process
// with another start time. One still alive is ErrKnownMemberAlive.
func (h *Handle) knownDeaths(dl time.Time) ([]proofs.KnownDeath, error) {
	c := h.Cohort
	if c.PID <= 0 || c.StartTime == 0 || c.AnchorPID <= 0 || c.AnchorStart == 0 {
		return nil, fmt.Errorf("the cohort record lacks the engine's or the anchor's pid and start time, so their deaths cannot be observed")
	}
	var out []proofs.KnownDeath
	for _, k := range []struct {
		role   string
		pid    int
		start  uint64
		reaped <-chan struct{}
		at     *uint64
	}{
		{proofs.RoleEngine, c.PID, c.StartTime, h.engineReaped(), &h.reapedAt},
		{proofs.RoleAnchor, c.AnchorPID, c.AnchorStart, h.anchorDone, &h.anchorReapedAt},
	} {
		d, err := observeDeath(k.role, k.pid, k.start, k.reaped, k.at, dl)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// engineReaped is closed once this process reaped the engine; nil after
// Reattach (this process is not its parent).
func (h *Handle) engineReaped() <-chan struct{} {
	if h.engine == nil {
		return nil
	}
	return h.done
}

// observeDeath observes one known member's death. reaped, if not nil, is
// closed when this process reaped it (its time in *at). A process leaves
// its cgroup a moment before its exit is signalled (cgroup_exit runs
// before exit_notify), so one seen alive is looked at again for up to
// exitWindow, never past dl; one alive after that left the cgroup before
// it was removed.
func observeDeath(role string, pid int, start uint64, reaped <-chan struct{}, at *uint64, dl time.Time) (proofs.KnownDeath, error) {
	d := proofs.KnownDeath{Role: role, PID: pid, StartTime: start}
	until := time.Now().Add(exitWindow)
	if dl.Before(until) {
		until = dl
	}
	for {
		if reaped != nil {
			select {
			case <-reaped:
				d.How, d.DiedAt = proofs.DeathReaped, *at
				return d, nil
			default:
			}
		}
		how, err := probeDeath(pid, start)
		if err != nil {
			return d, fmt.Errorf("%s pid %d: %w", role, pid, err)
		}
		if how != "" {
			d.How, d.DiedAt = how, procfs.BoottimeNanos()
			return d, nil
		}
		if !time.Now().Before(until) {
			return d, fmt.Errorf("%s pid %d (start %d) is alive: %w", role, pid, start, ErrKnownMemberAlive)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// exitWindow bounds how long a known member seen alive after its cgroup
// was removed is looked at again before it counts as having left.
const exitWindow = 2 * time.Second

// probeDeath reports how pid (recorded with start) is seen dead, or "" if
// it is alive. It pins the pid with a pidfd before reading /proc, so the
// reads describe the pinned process.
func probeDeath(pid int, start uint64) (string, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return proofs.DeathGone, nil
	}
	if err != nil {
		return "", fmt.Errorf("pidfd_open: %w", err)
	}
	defer unix.Close(fd)
	st, serr := procfs.ReadStat(pid)
	exited := pidfdExited(fd)
	switch {
	case serr == nil && st.StartTime != start:
		return proofs.DeathPIDReused, nil
	case exited:
		return proofs.DeathExited, nil
	case serr != nil && errors.Is(serr, os.ErrNotExist):
		// Reaped between pidfd_open and the read: the pidfd says so next.
		if pidfdExited(fd) {
			return proofs.DeathExited, nil
		}
		return "", fmt.Errorf("stat unreadable while alive: %w", serr)
	case serr != nil:
		return "", serr
	}
	return "", nil
}

// pidfdExited reports whether a pidfd polls readable: its process exited.
func pidfdExited(fd int) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, _ := unix.Poll(fds, 0)
	return n > 0 && fds[0].Revents&(unix.POLLIN|unix.POLLHUP) != 0
}
