package scopes

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/mosaic-agents/mosaic/internal/procfs"
	"golang.org/x/sys/unix"
)

// Member is one process of a cohort, identified by pid and start time.
type Member struct {
	PID       int    `json:"pid"`
	StartTime uint64 `json:"start_time"` // field 22 of /proc/<pid>/stat, clock ticks since boot
	Comm      string `json:"comm"`
	Died      bool   `json:"died"`              // death observed on its pidfd
	DiedAt    uint64 `json:"died_at,omitempty"` // CLOCK_BOOTTIME ns when the death was observed
}

// member is a Member with the pidfd that pins its identity.
type member struct {
	Member
	fd int // pidfd; -1 once closed
}

func (m *member) close() {
	if m.fd >= 0 {
		unix.Close(m.fd)
		m.fd = -1
	}
}

// cgroupRef names the cgroup a member must be in or below: its path
// below the cgroup2 mount and, where known, its id (the directory's inode
// number, which the kernel never reuses within a boot). The zero value
// asks for no check.
type cgroupRef struct {
	Path string
	ID   uint64
}

// openMember opens a pidfd on pid and identifies the process behind it.
// The pidfd pins the process; /proc is read after it is opened and the
// process is checked alive afterwards, so the reads describe the pinned
// process and not a successor with a reused pid. wantStart, if not zero, is
// the recorded start time (ErrPIDReused on mismatch); within, if not
// empty, is the cgroup the process must be in or below (ErrNotMember).
func openMember(pid int, wantStart uint64, within cgroupRef) (*member, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil, fmt.Errorf("pid %d: %w", pid, ErrVanished)
		}
		return nil, fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	m := &member{Member: Member{PID: pid}, fd: fd}
	fail := func(err error) (*member, error) {
		m.close()
		return nil, err
	}
	st, err := procfs.ReadStat(pid)
	if err != nil {
		return fail(fmt.Errorf("pid %d: %w (%v)", pid, ErrVanished, err))
	}
	if err := m.placed(within); err != nil {
		return fail(err)
	}
	m.StartTime, m.Comm = st.StartTime, st.Comm
	if wantStart != 0 && st.StartTime != wantStart {
		return fail(fmt.Errorf("pid %d start %d, recorded %d: %w", pid, st.StartTime, wantStart, ErrPIDReused))
	}
	return m, nil
}

// placed checks, after /proc was read by pid, that the pinned process
// still held that pid (so the reads were its own) and is inside within.
//
// Where the kernel has PIDFD_GET_INFO (Linux 6.13) the question goes
// through the pidfd itself: it fails for a process that no longer holds
// its pid, and it names the process's cgroup by id, with no /proc file
// read by a pid that could by then be another's. A member directly in
// within, the common case, costs that one call instead of reading
// /proc/<pid>/cgroup and sending signal 0. A member in a sub-cgroup (or a
// kernel without the call) is decided by /proc/<pid>/cgroup, read before
// the liveness check, as the stat was; one the pidfd placed in a cgroup
// with another id but /proc at within's path exactly is in a cgroup that
// replaced ours there, and is no member.
func (m *member) placed(within cgroupRef) error {
	other := uint64(0) // the id the pidfd named, when not within's
	// A 32-bit kernel gives a cgroup directory only the low half of the
	// cgroup's id as its inode number (what the launch records): there the
	// ids never match, and only the path decides.
	if within.ID != 0 && strconv.IntSize == 64 {
		// Never PIDFD_INFO_EXIT: with it (Linux 6.15) a reaped process
		// answers with the cgroup id it died in instead of ESRCH.
		info := unix.PidfdInfo{Mask: unix.PIDFD_INFO_CGROUPID}
		err := unix.IoctlPidfdInfo(m.fd, &info)
		switch {
		case err == nil && info.Mask&unix.PIDFD_INFO_CGROUPID != 0 && info.Cgroupid == within.ID:
			return nil
		case errors.Is(err, unix.ESRCH):
			return fmt.Errorf("pid %d: %w (%v)", m.PID, ErrVanished, err)
		case err == nil && info.Mask&unix.PIDFD_INFO_CGROUPID != 0:
			other = info.Cgroupid
		}
	}
	var cg string
	if within.Path != "" {
		var err error
		if cg, err = procfs.Cgroup2(m.PID); err != nil {
			return fmt.Errorf("pid %d: %w (%v)", m.PID, ErrVanished, err)
		}
	}
	if err := unix.PidfdSendSignal(m.fd, 0, nil, 0); err != nil {
		// Dead (or reaped) after the reads: they may describe another
		// process, so nothing read is trusted.
		return fmt.Errorf("pid %d: %w (%v)", m.PID, ErrVanished, err)
	}
	if within.Path != "" && cg != within.Path && !strings.HasPrefix(cg, within.Path+"/") {
		return fmt.Errorf("pid %d in %s, not below %s: %w", m.PID, cg, within.Path, ErrNotMember)
	}
	if other != 0 && cg == within.Path {
		return fmt.Errorf("pid %d in %s with id %d, not the cohort's cgroup %d there: %w", m.PID, cg, other, within.ID, ErrNotMember)
	}
	return nil
}

// signal sends sig through the pidfd: it can only reach the pinned process.
func (m *member) signal(sig unix.Signal) error {
	if m.fd < 0 {
		return fmt.Errorf("pid %d: pidfd closed", m.PID)
	}
	return unix.PidfdSendSignal(m.fd, sig, nil, 0)
}

// waitDeaths waits until every member's pidfd is readable (the process
// exited) or the deadline passes, recording each death's CLOCK_BOOTTIME
// time when it is seen. A deadline in the past makes one non-blocking
// pass. It returns the members still alive (a member whose pidfd is
// closed is not waited for).
//
// One poll(2) pass takes the deaths already there (all of them after a
// TERM phase that emptied the cgroup); the rest are watched with epoll,
// each pidfd registered once (EPOLLONESHOT, so a death is reported once),
// where a poll(2) loop registers every pending pidfd again on each
// wake-up, and the deaths of a 200-member kill wake it tens of times.
func waitDeaths(ms []*member, deadline time.Time) []*member {
	pending := unobserved(ms)
	if len(pending) == 0 {
		return nil
	}
	if !pollDeaths(pending) {
		return pending
	}
	pending = unobserved(pending)
	if len(pending) == 0 || !time.Now().Before(deadline) {
		return pending
	}
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return pending
	}
	defer unix.Close(ep)
	for i, m := range pending {
		ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLONESHOT, Fd: int32(i)}
		if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, m.fd, &ev); err != nil {
			return pending
		}
	}
	left := len(pending)
	evs := make([]unix.EpollEvent, 64)
	for left > 0 {
		wait := time.Until(deadline)
		if wait <= 0 {
			break
		}
		n, err := unix.EpollWait(ep, evs, int(min(wait, time.Second).Milliseconds())+1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			break
		}
		now := procfs.BoottimeNanos()
		for _, e := range evs[:n] {
			m := pending[e.Fd]
			if e.Events&(unix.EPOLLIN|unix.EPOLLHUP) == 0 {
				// Not a death: watch it again.
				ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLONESHOT, Fd: e.Fd}
				if err := unix.EpollCtl(ep, unix.EPOLL_CTL_MOD, m.fd, &ev); err != nil {
					return unobserved(pending)
				}
				continue
			}
			if !m.Died {
				m.Died, m.DiedAt = true, now
				left--
			}
		}
	}
	return unobserved(pending)
}

// unobserved is the members whose death is not observed yet and whose
// pidfd is open.
func unobserved(ms []*member) []*member {
	var out []*member
	for _, m := range ms {
		if !m.Died && m.fd >= 0 {
			out = append(out, m)
		}
	}
	return out
}

// pollDeaths makes one non-blocking poll(2) pass over the members'
// pidfds and records the deaths it sees; false if poll failed.
func pollDeaths(ms []*member) bool {
	fds := make([]unix.PollFd, len(ms))
	for i, m := range ms {
		fds[i] = unix.PollFd{Fd: int32(m.fd), Events: unix.POLLIN}
	}
	for {
		n, err := unix.Poll(fds, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return false
		}
		if n > 0 {
			now := procfs.BoottimeNanos()
			for i, f := range fds {
				if f.Revents&(unix.POLLIN|unix.POLLHUP) != 0 {
					ms[i].Died, ms[i].DiedAt = true, now
				}
			}
		}
		return true
	}
}
