package activation

import (
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

// PeerCred reads SO_PEERCRED of a Unix socket connection. The kernel fills
// it at connect(2), so the peer cannot forge it.
func PeerCred(c net.Conn) (Cred, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return Cred{}, fmt.Errorf("peer credentials: %T is not a Unix socket", c)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return Cred{}, fmt.Errorf("peer credentials: %w", err)
	}
	var cred *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return Cred{}, fmt.Errorf("peer credentials: %w", err)
	}
	if serr != nil {
		return Cred{}, fmt.Errorf("peer credentials: SO_PEERCRED: %w", serr)
	}
	return Cred{UID: int(cred.Uid), GID: int(cred.Gid), PID: int(cred.Pid)}, nil
}
