package scopes

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// fdSlots is the size this process's descriptor table is grown to once
// it runs an engine: a stop holds a pidfd for every member it pins (and
// the controller two descriptors for each connection), so a cohort of
// up to about a thousand processes is pinned without growing it.
const fdSlots = 1024

// reserveFDs grows the descriptor table to fdSlots in the background,
// once per Manager, so that no stop has to. The kernel grows a table by
// doubling, and in a process whose threads share it (every Go process)
// each doubling waits for an RCU grace period (expand_fdtable calls
// synchronize_rcu) while every other thread that opens a descriptor
// waits for the resize: in a fresh controller the first TERM phase of a
// 201-process cohort took 14–34 ms to pin its members instead of 2–5 ms.
// Done at launch, after the engine is released, the wait falls where
// nothing is timed by anyone.
func (m *Manager) reserveFDs() {
	m.fdOnce.Do(func() {
		go func() {
			defer close(m.fdsReserved)
			_ = growFDTable(fdSlots)
		}()
	})
}

// growFDTable makes the descriptor table hold at least slots entries by
// duplicating a descriptor to the lowest free number at or above
// slots-1 and closing it again. F_DUPFD never replaces a descriptor in
// use, as dup2 onto slots-1 would.
func growFDTable(slots int) error {
	fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("grow the descriptor table: %w", err)
	}
	defer unix.Close(fd)
	hi, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, slots-1)
	if err != nil {
		// Past RLIMIT_NOFILE: a stop grows the table as far as it may.
		return fmt.Errorf("grow the descriptor table to %d: %w", slots, err)
	}
	return unix.Close(hi)
}
