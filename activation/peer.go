package activation

import (
	"errors"
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// Cred is a peer's identity as the kernel recorded it at connect time.
type Cred struct {
	UID int
	GID int
	PID int
}

// Peer is the process at the other end of a conversation connection: its
// credentials from connect(2) and, where the kernel has it, a pidfd of that
// very process, through which every later look at the peer is checked.
// Close releases the pidfd.
type Peer struct {
	Cred
	// pidfd refers to the connecting process (SO_PEERPIDFD, or pidfd_open
	// of the SO_PEERCRED pid on an older kernel); -1 when neither works.
	pidfd int
	// exact is true when pidfd came from SO_PEERPIDFD, i.e. names the
	// connecting process itself and not whatever held its pid later.
	exact bool
}

// ErrPeerUnreadable means a peer's identity could not be established: it
// exited, or something about it could not be read. Callers treat such a
// peer as an engine peer, never as an outsider.
var ErrPeerUnreadable = errors.New("peer identity unreadable")

// PeerCred reads SO_PEERCRED of a Unix socket connection. The kernel fills
// it at connect(2), so the peer cannot forge it.
func PeerCred(c net.Conn) (Cred, error) {
	var cred Cred
	err := control(c, func(fd int) error {
		uc, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
		if err != nil {
			return fmt.Errorf("SO_PEERCRED: %w", err)
		}
		cred = Cred{UID: int(uc.Uid), GID: int(uc.Gid), PID: int(uc.Pid)}
		return nil
	})
	return cred, err
}

// OpenPeer reads the peer of a Unix socket connection: SO_PEERCRED for its
// uid, gid and pid, and SO_PEERPIDFD (Linux ≥ 6.5) for a pidfd of the
// process that connected. Without SO_PEERPIDFD it falls back to
// pidfd_open(2) of the SO_PEERCRED pid, which may already name another
// process if the peer exited and its pid was reused in between (the
// package doc weighs this). The uid is always returned when SO_PEERCRED
// could be read, even if no pidfd could be had.
func OpenPeer(c net.Conn) (*Peer, error) {
	cred, err := PeerCred(c)
	if err != nil {
		return nil, err
	}
	p := &Peer{Cred: cred, pidfd: -1}
	control(c, func(fd int) error {
		pfd, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PEERPIDFD)
		if err == nil && pfd >= 0 {
			p.pidfd, p.exact = pfd, true
		}
		return nil
	})
	if p.pidfd < 0 && cred.PID > 0 {
		if pfd, err := unix.PidfdOpen(cred.PID, 0); err == nil {
			unix.CloseOnExec(pfd)
			p.pidfd = pfd
		}
	}
	return p, nil
}

// ProcessPeer holds a process found otherwise than through a connection
// (a test, a diagnosis) as a Peer, by pidfd_open(2) of pid: whatever held
// pid at that moment.
func ProcessPeer(pid int) (*Peer, error) {
	pfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: pidfd_open %d: %w", ErrPeerUnreadable, pid, err)
	}
	unix.CloseOnExec(pfd)
	return &Peer{Cred: Cred{UID: -1, GID: -1, PID: pid}, pidfd: pfd}, nil
}

// Exact reports whether the peer is held by a pidfd the kernel took at
// connect time (SO_PEERPIDFD), so pid reuse cannot answer for it.
func (p *Peer) Exact() bool { return p.exact }

// Close releases the pidfd. It is safe to call more than once.
func (p *Peer) Close() error {
	if p == nil || p.pidfd < 0 {
		return nil
	}
	err := unix.Close(p.pidfd)
	p.pidfd = -1
	return err
}

// alive reports whether the connecting process still runs (or is a zombie
// not yet reaped): pidfd_send_signal with signal 0 delivers nothing and
// fails with ESRCH once the process is gone. Without a pidfd the peer can
// never be vouched for.
func (p *Peer) alive() error {
	if p.pidfd < 0 {
		return fmt.Errorf("%w: no pidfd for pid %d (kernel without pidfd_open?)", ErrPeerUnreadable, p.PID)
	}
	if err := unix.PidfdSendSignal(p.pidfd, 0, nil, 0); err != nil {
		return fmt.Errorf("%w: pid %d: %w", ErrPeerUnreadable, p.PID, err)
	}
	return nil
}

// control runs f on the raw fd of a Unix socket connection.
func control(c net.Conn, f func(fd int) error) error {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return fmt.Errorf("peer credentials: %T is not a Unix socket", c)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return fmt.Errorf("peer credentials: %w", err)
	}
	var ferr error
	if err := raw.Control(func(fd uintptr) { ferr = f(int(fd)) }); err != nil {
		return fmt.Errorf("peer credentials: %w", err)
	}
	if ferr != nil {
		return fmt.Errorf("peer credentials: %w", ferr)
	}
	return nil
}
