// Package activation is the controller's side of socket activation: it
// takes the one listener systemd passed, reads a client's credentials from
// the kernel, and tells the service manager when it is ready.
package activation

import (
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/coreos/go-systemd/v22/activation"
	"github.com/coreos/go-systemd/v22/daemon"
)

// FDName is the FileDescriptorName= of the conversation socket.
const FDName = "control"

// ErrNoListener means the process was not socket-activated as expected.
var ErrNoListener = errors.New("no activated listener")

// Listener returns the single activated listener named FDName. It refuses
// to guess: zero listeners, several, or one that is not a stream socket is
// an error, since serving the wrong socket would expose the conversation.
// The LISTEN_* variables are unset so they never reach the engine.
func Listener() (net.Listener, error) {
	named, err := activation.ListenersWithNames()
	if err != nil {
		return nil, fmt.Errorf("read activated sockets: %w", err)
	}
	var all []net.Listener
	for name, ls := range named {
		for _, l := range ls {
			if l == nil {
				return nil, fmt.Errorf("%w: activated fd %q is not a listening socket", ErrNoListener, name)
			}
			all = append(all, l)
		}
	}
	switch {
	case len(all) == 0:
		return nil, fmt.Errorf("%w: start the conversation with `systemctl --user start mosaic-conv@<id>.socket`, or pass --listen PATH for development", ErrNoListener)
	case len(all) > 1:
		for _, l := range all {
			l.Close()
		}
		return nil, fmt.Errorf("%w: got %d activated sockets, want exactly one", ErrNoListener, len(all))
	}
	if ls := named[FDName]; len(ls) != 1 {
		all[0].Close()
		return nil, fmt.Errorf("%w: the activated socket is not named %q (FileDescriptorName=)", ErrNoListener, FDName)
	}
	return all[0], nil
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
