package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mosaic-agents/mosaic/internal/xdg"
	"github.com/mosaic-agents/mosaic/units"
)

// homeBases are the base directories mosaicctl and the controllers must
// agree on: the configuration (conversations, env files, and where
// install writes the units) and the state (claims, engines' state,
// mosaicctl's copy).
var homeBases = []xdg.Base{xdg.Config, xdg.State}

// checkHomes compares this mosaicctl's XDG_CONFIG_HOME and
// XDG_STATE_HOME with the user manager's, which every controller gets. A
// value exported in a shell's rc file reaches every mosaicctl typed there
// and no controller: `conv add` registers a conversation no controller
// finds, and install writes units the manager does not read.
func checkHomes(ctx context.Context) (string, error) {
	v, err := units.ReadManagerView(ctx)
	if err != nil {
		return "", fmt.Errorf("cannot compare with the user manager's environment: %w", err)
	}
	return judgeHomes(os.Getenv, units.Getenv(v.Environment))
}

// noteHomes warns, after conv add registered a conversation, when this
// shell's XDG_CONFIG_HOME or XDG_STATE_HOME is not the user manager's: the
// controller the manager starts would not find that conversation (config)
// or would keep its claims elsewhere (state). The conversation stays
// registered, since the fix is in the environment, not in it; a manager
// that cannot be asked is doctor's to report, not add's.
func noteHomes(ctx context.Context, w io.Writer) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var f *finding
	if _, err := checkHomes(ctx); errors.As(err, &f) && f.verdict == verdictFail {
		fmt.Fprintf(w, "mosaicctl: warning: %s. Fix: %s\n", f.msg, f.fix)
	}
}

// judgeHomes compares each base directory as resolved here (getenv) and
// in the user manager's environment (manager).
func judgeHomes(getenv, manager func(string) string) (string, error) {
	var same, differ, fixes []string
	for _, b := range homeBases {
		here, err := b.In(getenv)
		if err != nil {
			return "", err
		}
		there, err := b.In(manager)
		if err != nil {
			return "", fmt.Errorf("the user manager's %s: %w", b.Env, err)
		}
		if sameFile(here, there) {
			same = append(same, fmt.Sprintf("%s=%s", b.Env, here))
			continue
		}
		differ = append(differ, fmt.Sprintf("%s is %s here (%s) but %s for the user manager and the controllers it starts (%s)",
			b.Env, here, setOrDefault(getenv, b), there, setOrDefault(manager, b)))
		fixes = append(fixes, homeFix(b, here, there, filepath.IsAbs(getenv(b.Env))))
	}
	if len(differ) > 0 {
		return "", failf(strings.Join(fixes, "; "),
			"%s: a conversation `conv add` registers here is not one a controller finds, and units install writes here are not read",
			strings.Join(differ, "; "))
	}
	return strings.Join(same, ", ") + ", as the user manager's", nil
}

// setOrDefault says where a value came from.
func setOrDefault(getenv func(string) string, b xdg.Base) string {
	if !filepath.IsAbs(getenv(b.Env)) {
		return "unset: the default"
	}
	return "set"
}

// homeFix says how to make b agree, here and there being its values in
// this process and in the user manager. The manager reads its own unit
// files under its own XDG_CONFIG_HOME, which environment.d does not
// change (it only sets what the manager passes on); ManagerEnvironment=
// in user.conf changes both, and a daemon-reload applies it.
func homeFix(b xdg.Base, here, there string, setHere bool) string {
	if !setHere {
		return fmt.Sprintf("`export %s=%s` in your shell's rc file too, or remove it from the user manager's environment "+
			"(~/.config/environment.d/*.conf, ~/.config/systemd/user.conf; `systemctl --user show-environment` shows it)", b.Env, there)
	}
	fix := fmt.Sprintf("unset %s where your shell sets it (its rc file), or give the user manager the same: "+
		"`ManagerEnvironment=%s=%s` in the [Manager] section of ~/.config/systemd/user.conf (systemd 248 or later), "+
		"then `systemctl --user daemon-reload` and `mosaicctl install`", b.Env, b.Env, here)
	if b == xdg.Config {
		return fix + " (a line in ~/.config/environment.d/*.conf reaches the controllers but does not move where the manager " +
			"reads unit files: install then with `--unit-dir ~/.config/systemd/user`)"
	}
	return fix + " (or a line in ~/.config/environment.d/*.conf, then `systemctl --user daemon-reload`)"
}
