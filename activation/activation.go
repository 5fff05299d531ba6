// Package activation is the controller's side of socket activation: it
// takes the one listener systemd passed, reads a client's identity from
// the kernel, and tells the service manager when it is ready.
//
// # Peer identity
//
// The engine's tool children run as the same uid as the operator, so the
// uid (SO_PEERCRED) says only that a peer may connect. What may act on the
// conversation is decided by a Judge, and it fails closed: a peer is an
// engine peer — it may observe, never control — when
//
//   - its cgroup lies inside any mosaic-engine-*.scope (of this or another
//     conversation), or that of one of its ancestors does (a process a tool
//     started through `systemd-run --user --scope`, or one that moved
//     itself out of the scope, while the tool that started it still runs);
//   - its pid namespace or its user namespace is not the controller's: a
//     confined engine runs its tools in namespaces of their own, which no
//     descendant can leave, and a peer in any other namespace cannot be
//     told apart from them;
//   - anything about it cannot be read: it exited, the kernel names no pid
//     for it (its pid namespace is not below ours), its namespace links are
//     closed to us (a non-dumpable process), its ancestry is deeper than
//     128, or no pidfd could be had.
//
// The peer is held by a pidfd taken with SO_PEERPIDFD (Linux ≥ 6.5): the
// kernel's reference to the process that called connect(2), not to its pid
// number. Every look at /proc/<pid> is bracketed by pidfd_send_signal(0)
// before and after: a pid is not reused while its process lives, so reads
// between two successful checks describe the connecting process, and a
// process that exited in between fails the second check. That closes the
// fork race (connect, hand the socket to a child, exit: the old check read
// an absent /proc/<pid> and answered "not a peer").
//
// Where SO_PEERPIDFD is missing (Linux < 6.5), the pidfd comes from
// pidfd_open(2) of the SO_PEERCRED pid, taken right after accept. What that
// leaves open: if the connecting process exited and its pid was reused
// between its connect and that pidfd_open, the checks describe the new
// holder of the pid. An attacker must make the pid wrap (pid_max is 4
// million on systemd hosts) inside that window and have the new holder be
// a process of the operator's that passes the judge; the brackets still
// make any later exit fail closed. Without pidfd_open (Linux < 5.3) no
// peer can be vouched for and every peer is an engine peer.
//
// The controller judges each peer at accept and again before every command
// but observe (controller.Controller.command); once an engine peer, always
// one, so moving out of the scope after the hello gains nothing. What the
// judge cannot see: an unconfined tool that asks the user manager for a
// service (`systemd-run --user --unit=x …`) gets a process with no tie to
// the engine in the controller's namespaces. Confining the engine (no
// user bus, no socket directory, own namespaces) closes that route; this
// check is the second wall, not the first.
package activation

import (
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/coreos/go-systemd/v22/daemon"
	"golang.org/x/sys/unix"
)

// FDName is the FileDescriptorName= of the conversation socket.
const FDName = "control"

// ErrNoListener means the process was not socket-activated as expected.
var ErrNoListener = errors.New("no activated listener")

// Listener returns the single activated listener named FDName. It refuses
// to guess: zero activated fds, several, or one that is not a listening
// stream socket is an error, since serving the wrong socket would expose
// the conversation. The LISTEN_* variables are unset so they never reach
// the engine.
func Listener() (net.Listener, error) {
	l, stored, err := Activated()
	if err != nil {
		return nil, err
	}
	if len(stored) > 0 {
		l.Close()
		for _, f := range stored {
			f.Close()
		}
		return nil, fmt.Errorf("%w: got %d activated fds besides %q, want exactly one", ErrNoListener, len(stored), FDName)
	}
	return l, nil
}

// streamListening checks that f is a socket in listen(2) state of type
// SOCK_STREAM: net.FileListener takes any socket with an address, a
// datagram one too, and would then fail at the first accept.
func streamListening(f *os.File) error {
	fd := int(f.Fd())
	typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil {
		return fmt.Errorf("not a socket: %w", err)
	}
	if typ != unix.SOCK_STREAM {
		return fmt.Errorf("socket type %d is not SOCK_STREAM (ListenStream=)", typ)
	}
	if acc, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN); err != nil || acc != 1 {
		return fmt.Errorf("the socket is not listening (%v)", err)
	}
	return nil
}

// Listen creates a development listener at path (what --listen does): the
// socket is created 0600 so the same peer rules hold as under systemd.
func Listen(path string) (net.Listener, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale socket %q: %w", path, err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %q: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("chmod socket %q: %w", path, err)
	}
	return l, nil
}

// Notify sends state to the service manager (sd_notify). Outside systemd
// it does nothing and reports false.
func Notify(state string) (bool, error) {
	return daemon.SdNotify(false, state)
}
