package scopes

import (
	"os"
	"path/filepath"

	"github.com/mosaic-agents/mosaic/internal/xdg"
)

// managerDirs are the user manager's own configuration in the home, which
// it runs outside every cohort at the next daemon-reload or login: unit
// files and drop-ins ($XDG_CONFIG_HOME/systemd/user, also user.conf
// beside it; $XDG_DATA_HOME/systemd/user) and the environment of every
// user service ($XDG_CONFIG_HOME/environment.d, where an LD_PRELOAD
// reaches the next controller). A tool that wrote a timer or rewrote
// mosaic-conv@.service there would run code of its choosing outside the
// cohort, under mosaic's own units among others. Each is made if missing
// (0700, as hiddenDirs does), so one created after the launch is covered
// too; a directory that cannot be made is left out, its absence noted by
// the mask.
func managerDirs() []string {
	var out []string
	if c, err := xdg.ConfigHome(); err == nil {
		out = append(out, filepath.Join(c, "systemd"), filepath.Join(c, "environment.d"))
	}
	if d, err := xdg.DataHome(); err == nil {
		out = append(out, filepath.Join(d, "systemd"))
	}
	for _, d := range out {
		_ = os.MkdirAll(d, 0o700)
	}
	return out
}
