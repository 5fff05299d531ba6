package scopes

import (
	"os"
	"path"
)

// The system bus's socket, journald's socket directory and PID 1's
// notification socket, masked in every engine (planConfinement says why).
const (
	systemBus      = "/run/dbus/system_bus_socket"
	journalSockets = "/run/systemd/journal"
	systemNotify   = "/run/systemd/notify"
)

// displayDirs are the X11 socket directories in the /tmp the engine
// shares with the user: the display's file-system socket (X11), session
// management (ICE) and input methods (XIM), each a way to type into, or
// start a program from, the user's desktop. Masked in every engine
// (planConfinement).
var displayDirs = []string{"/tmp/.X11-unix", "/tmp/.ICE-unix", "/tmp/.XIM-unix"}

// Unseen are the paths an engine launched now with Spec.Hide hide cannot
// read (planConfinement): hide, the runtime directories it gets a private
// tmpfs of its own in place of, the terminal multiplexers' socket
// directories (as far as they exist), the user manager's and the buses'
// sockets and configuration, the display's sockets, and /proc and
// /dev, of which it gets its own. A
// controller that reads a file for an engine, outside it (Pi's auth.json,
// copied into the engine's agent directory), reads none that lies in
// them. Unlike a launch, it makes nothing.
func Unseen(hide ...string) []string {
	out := []string{"/proc", devDir, systemBus, journalSockets, systemNotify}
	for _, group := range [][]string{hide, runtimeDirs(), muxDirsMade(false), SessionDirs(), busMasks(), displayDirs} {
		for _, p := range group {
			if path.IsAbs(p) {
				out = append(out, path.Clean(p))
			}
		}
	}
	// And every other place a mount shows them, as a launch masks them.
	if mounts, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		out = append(out, aliases(string(mounts), out)...)
	}
	return out
}
