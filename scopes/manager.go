package scopes

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mosaic-agents/mosaic/internal/xdg"
)

// SessionDirs are the configuration the user's session runs outside
// every cohort, later, from places the user (and so an engine) can
// write: the user manager's unit files and drop-ins
// ($XDG_CONFIG_HOME/systemd/user, also user.conf beside it;
// $XDG_DATA_HOME/systemd/user) and the environment of every user service
// ($XDG_CONFIG_HOME/environment.d, where an LD_PRELOAD reaches the next
// controller), run at the next daemon-reload or login; the session bus's
// activatable services ($XDG_DATA_HOME/dbus-1, run when anyone outside
// asks for a name nobody owns); the desktop's autostart entries
// ($XDG_CONFIG_HOME/autostart, run at the next graphical login). The
// same below every entry of $XDG_DATA_DIRS and $XDG_CONFIG_DIRS the user
// can write (Flatpak puts ~/.local/share/flatpak/exports/share first in
// the session's XDG_DATA_DIRS, searched before /usr/share). A tool that
// wrote a timer, rewrote mosaic-conv@.service or planted a service file
// there would run code of its choosing outside the cohort.
func SessionDirs() []string {
	var out []string
	add := func(base string, names ...string) {
		for _, n := range names {
			if p := filepath.Join(base, n); !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	if c, err := xdg.ConfigHome(); err == nil {
		add(c, "systemd", "environment.d", "autostart")
	}
	if d, err := xdg.DataHome(); err == nil {
		add(d, "systemd", "dbus-1")
	}
	for _, d := range userDirs(os.Getenv("XDG_DATA_DIRS")) {
		add(d, "systemd", "dbus-1")
	}
	for _, c := range userDirs(os.Getenv("XDG_CONFIG_DIRS")) {
		add(c, "systemd", "autostart")
	}
	return out
}

// userDirs are the absolute entries of a colon-separated list whose
// entries the user can change (userCanChange).
func userDirs(list string) []string {
	var out []string
	for _, d := range strings.Split(list, ":") {
		if filepath.IsAbs(d) && userCanChange(filepath.Clean(d)) {
			out = append(out, filepath.Clean(d))
		}
	}
	return out
}

// managerDirs is SessionDirs, each made if missing (0700, as hiddenDirs
// does), so one created after the launch is covered too; a directory
// that cannot be made is left to the mask, which notes it absent or,
// behind a link to nothing, fails the launch.
func managerDirs() []string {
	out := SessionDirs()
	for _, d := range out {
		_ = os.MkdirAll(d, 0o700)
	}
	return out
}
