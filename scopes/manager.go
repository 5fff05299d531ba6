package scopes

import (
	"os"
	"path/filepath"

	"github.com/mosaic-agents/mosaic/internal/xdg"
)

// managerDirs are the configuration in the home that the user's session
// runs outside every cohort, later: the user manager's unit files and
// drop-ins ($XDG_CONFIG_HOME/systemd/user, also user.conf beside it;
// $XDG_DATA_HOME/systemd/user) and the environment of every user service
// ($XDG_CONFIG_HOME/environment.d, where an LD_PRELOAD reaches the next
// controller), run at the next daemon-reload or login; the session bus's
// activatable services ($XDG_DATA_HOME/dbus-1, run when anyone outside
// asks for a name nobody owns); the desktop's autostart entries
// ($XDG_CONFIG_HOME/autostart, run at the next graphical login). A tool
// that wrote a timer, rewrote mosaic-conv@.service or planted a service
// file there would run code of its choosing outside the cohort. Each is
// made if missing (0700, as hiddenDirs does), so one created after the
// launch is covered too; a directory that cannot be made is left out,
// its absence noted by the mask.
func managerDirs() []string {
	var out []string
	if c, err := xdg.ConfigHome(); err == nil {
		out = append(out, filepath.Join(c, "systemd"), filepath.Join(c, "environment.d"), filepath.Join(c, "autostart"))
	}
	if d, err := xdg.DataHome(); err == nil {
		out = append(out, filepath.Join(d, "systemd"), filepath.Join(d, "dbus-1"))
	}
	for _, d := range out {
		_ = os.MkdirAll(d, 0o700)
	}
	return out
}
