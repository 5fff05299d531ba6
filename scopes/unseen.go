package scopes

import "path"

// The system bus's socket and journald's socket directory, masked in
// every engine (planConfinement says why).
const (
	systemBus      = "/run/dbus/system_bus_socket"
	journalSockets = "/run/systemd/journal"
)

// Unseen are the paths an engine launched now with Spec.Hide hide cannot
// read (planConfinement): hide, the runtime directories it gets a private
// tmpfs of its own in place of, the terminal multiplexers' socket
// directories (as far as they exist), the user manager's and the buses'
// sockets and configuration, and /proc, of which it gets a fresh one. A
// controller that reads a file for an engine, outside it (Pi's auth.json,
// copied into the engine's agent directory), reads none that lies in
// them. Unlike a launch, it makes nothing.
func Unseen(hide ...string) []string {
	out := []string{"/proc", systemBus, journalSockets}
	for _, group := range [][]string{hide, runtimeDirs(), muxDirsMade(false), SessionDirs(), busMasks()} {
		for _, p := range group {
			if path.IsAbs(p) {
				out = append(out, path.Clean(p))
			}
		}
	}
	return out
}
