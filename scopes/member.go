package scopes

import (
	"errors"
	"fmt"
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

// openMember opens a pidfd on pid and identifies the process behind it.
// The pidfd pins the process; /proc is read after it is opened and the
// process is checked alive afterwards, so the reads describe the pinned
// process and not a successor with a reused pid. wantStart, if not zero, is
// the recorded start time (ErrPIDReused on mismatch); within, if not
// empty, is the cgroup the process must be in or below (ErrNotMember).
func openMember(pid int, wantStart uint64, within string) (*member, error) {
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
	var cg string
	if within != "" {
		if cg, err = procfs.Cgroup2(pid); err != nil {
			return fail(fmt.Errorf("pid %d: %w (%v)", pid, ErrVanished, err))
		}
	}
	if err := unix.PidfdSendSignal(fd, 0, nil, 0); err != nil {
		// Dead (or reaped) after the reads: they may describe another
		// process, so nothing read is trusted.
		return fail(fmt.Errorf("pid %d: %w (%v)", pid, ErrVanished, err))
	}
	m.StartTime, m.Comm = st.StartTime, st.Comm
	if wantStart != 0 && st.StartTime != wantStart {
		return fail(fmt.Errorf("pid %d start %d, recorded %d: %w", pid, st.StartTime, wantStart, ErrPIDReused))
	}
	if within != "" && cg != within && !strings.HasPrefix(cg, within+"/") {
		return fail(fmt.Errorf("pid %d in %s, not below %s: %w", pid, cg, within, ErrNotMember))
	}
	return m, nil
}

// signal sends sig through the pidfd: it can only reach the pinned process.
func (m *member) signal(sig unix.Signal) error {
	if m.fd < 0 {
		return fmt.Errorf("pid %d: pidfd closed", m.PID)
	}
	return unix.PidfdSendSignal(m.fd, sig, nil, 0)
}

// waitDeaths polls the members' pidfds until every one is readable (the
// process exited) or the deadline passes, recording each death's
// CLOCK_BOOTTIME time when it is seen. A deadline in the past makes one
// non-blocking pass. It returns the members still alive.
func waitDeaths(ms []*member, deadline time.Time) []*member {
	for {
		var pending []*member
		var fds []unix.PollFd
		for _, m := range ms {
			if !m.Died && m.fd >= 0 {
				pending = append(pending, m)
				fds = append(fds, unix.PollFd{Fd: int32(m.fd), Events: unix.POLLIN})
			}
		}
		if len(pending) == 0 {
			return nil
		}
		timeout := 0
		if left := time.Until(deadline); left > 0 {
			timeout = int(min(left, time.Second).Milliseconds()) + 1
		}
		n, err := unix.Poll(fds, timeout)
		if err != nil && err != unix.EINTR {
			return pending
		}
		if n > 0 {
			now := procfs.BoottimeNanos()
			for i, f := range fds {
				if f.Revents&(unix.POLLIN|unix.POLLHUP) != 0 {
					pending[i].Died, pending[i].DiedAt = true, now
				}
			}
			continue
		}
		if timeout == 0 || !time.Now().Before(deadline) {
			var alive []*member
			for _, m := range pending {
				if !m.Died {
					alive = append(alive, m)
				}
			}
			return alive
		}
	}
}
