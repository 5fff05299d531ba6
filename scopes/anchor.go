package scopes

import (
	"os"

	"golang.org/x/sys/unix"
)

// pinAnchor opens a pidfd on the anchor while it is this process's
// unreaped child, so the pidfd is the anchor's whatever its pid names
// later. Without one (pidfd_open refused) every stop asks the manager.
func (h *Handle) pinAnchor() {
	fd, err := unix.PidfdOpen(h.anchor.Process.Pid, 0)
	if err != nil {
		return
	}
	h.anchorFD = os.NewFile(uintptr(fd), "anchor pidfd")
}

// anchorLives says whether the anchor has not exited, read from its
// pidfd. A live anchor holds the scope's cgroup populated, and the
// manager cannot end an invocation whose cgroup is populated short of
// giving up on a stop whose SIGKILL the anchor, a sleep, outlived for
// the unit's TimeoutStopUSec; a manager that went away took the anchor
// with it, from the same cgroup tree. So while this process's anchor
// lives, the unit's invocation is the one recorded at launch, which is
// what a stop otherwise asks the manager before it touches the path.
// Anything but a clean "not exited" (no pidfd, a Reattach handle, a
// failed poll) says no, and the stop asks.
func (h *Handle) anchorLives() bool {
	if h.anchorFD == nil || h.Cohort.InvocationID == "" || h.Cohort.CgroupID == 0 {
		return false
	}
	rc, err := h.anchorFD.SyscallConn()
	if err != nil {
		return false
	}
	lives := false
	err = rc.Control(func(fd uintptr) {
		p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(p, 0)
		lives = err == nil && n == 0
	})
	return err == nil && lives
}
