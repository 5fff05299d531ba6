package activation

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/coreos/go-systemd/v22/activation"
	"golang.org/x/sys/unix"
)

// File descriptor store (FileDescriptorStoreMax= in mosaic-conv@.service).
//
// The controller keeps the engine's pipe ends, a pidfd of the engine and
// the write end of a confined engine's stop pipe in the service manager,
// so a controller that restarts (upgrade, crash, `systemctl --user
// restart`) receives them again, after the activated socket, named as it
// stored them (LISTEN_FDNAMES), re-attaches to the same engine and stops
// it with the tools' grace. sd_notify has no way to pass descriptors in go-systemd, so
// Store sends its own datagram with SCM_RIGHTS.
//
// What the manager does with them: it keeps them across restarts of the
// service (Restart=, `systemctl restart`, daemon-reexec and
// daemon-reload serialise them) and closes them when the service stops
// for good (`systemctl stop`, a failure without restart), which is the
// engine's stdin EOF: Pi exits. A controller told to stop for good ends
// the engine with a proof first (controller.Shutdown); one that crashes
// without a restart leaves it to that EOF. It drops a stored descriptor by itself
// when it polls EPOLLHUP or EPOLLERR (the engine closed its end of the
// pipe; a pidfd does so only once its process is reaped, and only on
// Linux >= 6.9), so the controller removes what it stored
// (FDSTOREREMOVE=1) once the engine is gone.

// Activated returns the listener named FDName (as Listener does) and every
// other activated file, by name: what the fd store handed back. A file
// whose name is FDName twice, or another listener, is refused, since
// serving the wrong socket would expose the conversation.
func Activated() (net.Listener, map[string]*os.File, error) {
	files := activation.Files(true)
	var ctl []*os.File
	stored := map[string]*os.File{}
	for _, f := range files {
		if f.Name() == FDName {
			ctl = append(ctl, f)
			continue
		}
		if old := stored[f.Name()]; old != nil {
			old.Close() // the store keeps names unique; a duplicate is not ours to guess
		}
		stored[f.Name()] = f
	}
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	switch {
	case len(ctl) == 0 && len(files) > 0:
		closeAll()
		return nil, nil, fmt.Errorf("%w: the %d activated fds are not named %q (FileDescriptorName=)", ErrNoListener, len(files), FDName)
	case len(ctl) == 0:
		closeAll()
		return nil, nil, fmt.Errorf("%w: start the conversation with `systemctl --user start mosaic-conv@<id>.socket`, or pass --listen PATH for development", ErrNoListener)
	case len(ctl) > 1:
		closeAll()
		return nil, nil, fmt.Errorf("%w: got %d activated sockets named %q, want exactly one", ErrNoListener, len(ctl), FDName)
	}
	l, err := listenerOf(ctl[0])
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	return l, stored, nil
}

func listenerOf(f *os.File) (net.Listener, error) {
	defer f.Close() // a listener made from f holds its own dup
	if err := streamListening(f); err != nil {
		return nil, fmt.Errorf("%w: activated fd %q: %w", ErrNoListener, f.Name(), err)
	}
	l, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("%w: activated fd %q: %w", ErrNoListener, f.Name(), err)
	}
	return l, nil
}

// ErrNoStore means there is no service manager to keep descriptors
// (NOTIFY_SOCKET unset): outside systemd, or in development.
var ErrNoStore = errors.New("no service manager fd store (NOTIFY_SOCKET is not set)")

// FDStore is the service manager's file descriptor store of this service.
type FDStore struct {
	addr string
}

// NewFDStore returns the store of the service this process runs as, or
// nil without NOTIFY_SOCKET.
func NewFDStore() *FDStore {
	a := os.Getenv("NOTIFY_SOCKET")
	if a == "" {
		return nil
	}
	return &FDStore{addr: a}
}

// Store hands f to the manager under name (FDSTORE=1, FDNAME=). The name
// must be a valid FDNAME (printable ASCII, no ':', at most 255 bytes).
// The manager keeps its own copy: f stays the caller's.
func (s *FDStore) Store(name string, f *os.File) error {
	if s == nil {
		return ErrNoStore
	}
	if err := validName(name); err != nil {
		return err
	}
	// Through the raw descriptor, not f.Fd(): Fd puts a non-blocking file
	// in blocking mode for good, and the engine's stdin stored here must
	// stay one a Close can wake a stuck write on (engine Conn.Close).
	rc, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("fd store %s: %w", name, err)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = s.send("FDSTORE=1\nFDNAME="+name, unix.UnixRights(int(fd))) }); err != nil {
		return fmt.Errorf("fd store %s: %w", name, err)
	}
	return serr
}

// Remove asks the manager to close and forget every descriptor stored
// under name (FDSTOREREMOVE=1).
func (s *FDStore) Remove(name string) error {
	if s == nil {
		return ErrNoStore
	}
	if err := validName(name); err != nil {
		return err
	}
	return s.send("FDSTOREREMOVE=1\nFDNAME="+name, nil)
}

// Barrier returns once the manager has processed every notification
// this process sent before it (BARRIER=1 with a pipe's write end, which
// the manager closes when it gets there: sd_notify_barrier(3)). The
// store's requests are datagrams the manager reads in its own time, so a
// question about what it holds asked over D-Bus could otherwise overtake
// them.
func (s *FDStore) Barrier(ctx context.Context) error {
	if s == nil {
		return ErrNoStore
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return fmt.Errorf("fd store barrier: pipe: %w", err)
	}
	defer unix.Close(p[0])
	err := s.send("BARRIER=1", unix.UnixRights(p[1]))
	unix.Close(p[1])
	if err != nil {
		return err
	}
	for {
		wait := -1
		if d, ok := ctx.Deadline(); ok {
			wait = max(0, int(time.Until(d).Milliseconds()))
		}
		fds := []unix.PollFd{{Fd: int32(p[0]), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, wait)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return fmt.Errorf("fd store barrier: poll: %w", err)
		case n == 0:
			return fmt.Errorf("fd store barrier: the manager did not answer: %w", context.DeadlineExceeded)
		}
		return nil // POLLHUP: the manager closed its copy
	}
}

func validName(name string) error {
	if name == "" || len(name) > 255 || strings.ContainsAny(name, ":") {
		return fmt.Errorf("fd store name %q: want 1 to 255 printable ASCII bytes without ':'", name)
	}
	for _, r := range name {
		if r < 0x21 || r > 0x7e {
			return fmt.Errorf("fd store name %q: want printable ASCII only", name)
		}
	}
	return nil
}

// send writes one notification datagram with oob (SCM_RIGHTS) to the
// manager. A datagram socket delivers it whole or not at all.
func (s *FDStore) send(state string, oob []byte) error {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("fd store: socket: %w", err)
	}
	defer unix.Close(fd)
	to := &unix.SockaddrUnix{Name: s.addr} // a leading '@' is an abstract address
	if err := unix.Sendmsg(fd, []byte(state), oob, to, 0); err != nil {
		return fmt.Errorf("fd store: send to %s: %w", s.addr, err)
	}
	return nil
}
