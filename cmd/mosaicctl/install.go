package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mosaic-agents/mosaic/internal/owner"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/units"
	"github.com/urfave/cli/v2"
)

func installCommand() *cli.Command {
	return &cli.Command{
		Name:  "install",
		Usage: "write the mosaic-conv@ and mosaic-web user units and reload the user manager",
		Description: "Writes mosaic-conv@.socket, mosaic-conv@.service, mosaic-web.socket and mosaic-web.service to ~/.config/systemd/user\n" +
			"(or /etc/systemd/user with --global, for every user) and reloads the user manager over\n" +
			"D-Bus. Running it again changes nothing and says so. It then asks the user manager where it\n" +
			"loads the units from, and refuses (configuration) units written where it does not read them:\n" +
			"an XDG_CONFIG_HOME exported in a shell only (`mosaicctl doctor` says how to fix that).",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "global", Usage: "install for every user into " + units.GlobalDir + " (admins)"},
			&cli.StringFlag{Name: "unit-dir", Usage: "install into `DIR` instead"},
			&cli.BoolFlag{Name: "force", Usage: "overwrite unit files mosaic did not write, and make the first copy of a replaceable mosaicctl while engines run"},
		},
		Action: func(c *cli.Context) error {
			dir, err := unitDir(c)
			if err != nil {
				return err
			}
			bin, err := runBinary(c)
			if err != nil {
				return err
			}
			files, err := units.Render(bin)
			if err != nil {
				return err
			}
			changes, err := units.Install(dir, files, c.Bool("force"))
			if err != nil {
				return err
			}
			if printChanges(changes) {
				if err := reloadAfter(c, "install"); err != nil {
					return err
				}
			} else {
				fmt.Printf("units in %s are up to date; nothing changed\n", dir)
			}
			if c.Bool("global") {
				return nil // users' managers load it at their next start
			}
			ctx, cancel := context.WithTimeout(c.Context, 30*time.Second)
			defer cancel()
			return refuseUnseen(ctx, dir)
		},
	}
}

func uninstallCommand() *cli.Command {
	return &cli.Command{
		Name:  "uninstall",
		Usage: "remove the mosaic-conv@ and mosaic-web user units, stopping the web surface's units first (refused while an engine runs or a conversation socket is active)",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "global", Usage: "remove from " + units.GlobalDir},
			&cli.StringFlag{Name: "unit-dir", Usage: "remove from `DIR` instead"},
			&cli.BoolFlag{Name: "force", Usage: "remove files mosaic did not write, and skip the checks for running engines and active sockets (with --global: in every user's manager)"},
		},
		Action: func(c *cli.Context) error {
			dir, err := unitDir(c)
			if err != nil {
				return err
			}
			if !c.Bool("force") && c.Bool("global") {
				ctx, cancel := context.WithTimeout(c.Context, 30*time.Second)
				defer cancel()
				if err := refuseGlobalInUse(ctx); err != nil {
					return err
				}
			}
			if !c.Bool("force") && !c.Bool("global") {
				ctx, cancel := context.WithTimeout(c.Context, 10*time.Second)
				defer cancel()
				if err := refuseLiveEngines(ctx, "", "uninstall"); err != nil {
					return err
				}
				active, err := units.ActiveSockets(ctx)
				if err != nil {
					return fmt.Errorf("check for active conversation sockets: %w; pass --force to uninstall without checking", err)
				}
				if len(active) > 0 {
					return protocol.Refuse(protocol.CodeSocketActive, "uninstall: conversation sockets are active: %s; stop them first: `systemctl --user stop %s` (or pass --force)",
						strings.Join(active, ", "), strings.Join(active, " "))
				}
			}
			// The user's own units: the web page's are stopped only when
			// their files are the ones going (not an admin's --global).
			own := !c.Bool("global") && c.String("unit-dir") == ""
			if _, err := os.Lstat(filepath.Join(dir, units.WebSocketUnit)); own && err == nil {
				if err := stopWeb(c); err != nil {
					return err
				}
			}
			changes, err := units.Uninstall(dir, c.Bool("force"))
			if err != nil {
				return err
			}
			if !printChanges(changes) {
				fmt.Printf("no mosaic units in %s; nothing changed\n", dir)
				return nil
			}
			if err := reloadAfter(c, "uninstall"); err != nil {
				return err
			}
			if own && c.Bool("force") {
				warnStillRunning(c)
			}
			return nil
		},
	}
}

func unitDir(c *cli.Context) (string, error) {
	switch {
	case c.String("unit-dir") != "":
		d := c.String("unit-dir")
		if !filepath.IsAbs(d) {
			return "", usageError("--unit-dir %q must be an absolute path, such as %s", d, filepath.Join("/", d))
		}
		return d, nil
	case c.Bool("global"):
		return units.GlobalDir, nil
	default:
		return units.UserDir()
	}
}

// selfPath is the absolute, symlink-free path of this binary, which the
// service unit's ExecStart= names: the file itself, so a symlink that is
// later repointed (or a PATH entry) never changes what the units run
// unnoticed; units.CheckBinary decides whether it lasts.
func selfPath() (string, error) {
	p, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find the mosaicctl binary: %w", err)
	}
	p, err = filepath.EvalSymlinks(p)
	if err != nil {
		return "", fmt.Errorf("resolve the mosaicctl binary: %w", err)
	}
	return p, nil
}

// runBinary is the binary the units will run: this one when the user
// cannot replace it, else install's copy of it (units.Place), which no
// engine can reach. A global install serves every user, whose engines
// could all replace a binary of this user's: it needs one nobody but
// root can.
func runBinary(c *cli.Context) (string, error) {
	bin, err := selfPath()
	if err != nil {
		return "", err
	}
	if c.Bool("global") {
		if !owner.RootOnly(bin) {
			return "", usageError("install --global: %s can be replaced by its owner, and every user's controllers would run it: install mosaicctl where only root can write (`sudo make install PREFIX=/usr/local`, or the package) and run that one", bin)
		}
	} else {
		if err := refuseFirstCopyBeside(c, bin); err != nil {
			return "", err
		}
		p, err := units.Place(bin)
		if err != nil {
			return "", fmt.Errorf("install: %w", err)
		}
		if p.Changed {
			fmt.Fprintf(os.Stderr, "mosaicctl: the units run a copy of %s at %s, where no engine can replace it; run `mosaicctl install` again after rebuilding or upgrading\n", bin, p.Run)
		}
		bin = p.Run
	}
	warning, err := units.CheckBinary(bin)
	if err != nil {
		return "", fmt.Errorf("install: %w", err)
	}
	if warning != "" {
		fmt.Fprintf(os.Stderr, "mosaicctl: warning: %s\n", warning)
	}
	return bin, nil
}

// refuseFirstCopyBeside refuses install's first copy of a replaceable
// binary while an engine runs (unless --force): an engine launched before
// mosaic hid the copy's directory (by an older mosaicctl) can reach it,
// and would have the next controller of every conversation run what it
// put there.
func refuseFirstCopyBeside(c *cli.Context, bin string) error {
	dir, err := units.BinDir()
	if c.Bool("force") || owner.BeyondUser(bin) || err != nil {
		return nil
	}
	if _, err := os.Lstat(filepath.Join(dir, "mosaicctl")); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	ctx, cancel := context.WithTimeout(c.Context, 10*time.Second)
	defer cancel()
	return refuseLiveEngines(ctx, "", "install (its first copy of mosaicctl, which an engine launched before it could replace)")
}

func printChanges(changes []units.Change) bool {
	changed := false
	for _, ch := range changes {
		if ch.Action != "unchanged" && ch.Action != "absent" {
			changed = true
			fmt.Printf("%-9s %s\n", ch.Action, ch.Path)
		}
	}
	return changed
}

// reloadAfter reloads the user manager after the unit files changed. A
// global install reaches every user's manager only at its next start.
func reloadAfter(c *cli.Context, what string) error {
	if c.Bool("global") {
		fmt.Println("users' managers load the change at their next start; a running one needs `systemctl --user daemon-reload`")
		return nil
	}
	ctx, cancel := context.WithTimeout(c.Context, 30*time.Second)
	defer cancel()
	if err := units.Reload(ctx); err != nil {
		return fmt.Errorf("%s wrote the files, but %w; run `systemctl --user daemon-reload`", what, err)
	}
	fmt.Println("reloaded the user manager")
	return nil
}

// stopWeb stops the web page's units before their files go: the server is
// one more client of the conversations and holds nothing of theirs, and
// left running it would serve on from files no longer there. A user
// manager that cannot be asked refuses the uninstall, as the checks for
// engines and sockets do, unless --force.
func stopWeb(c *cli.Context) error {
	ctx, cancel := context.WithTimeout(c.Context, 30*time.Second)
	defer cancel()
	stopped, err := units.StopUnits(ctx, units.WebSocketUnit, units.WebServiceUnit)
	for _, u := range stopped {
		fmt.Printf("stopped %s\n", u)
	}
	if err != nil && !c.Bool("force") {
		return fmt.Errorf("uninstall: stop the web page's units: %w; pass --force to uninstall without stopping them", err)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "mosaicctl: could not stop the web page's units: %v\n", err)
	}
	return nil
}

// warnStillRunning names what --force left running from the files it
// removed (conversation sockets, controllers, engine scopes), with the
// command that stops each: the user manager keeps running a unit whose
// file is gone (not-found, active).
func warnStillRunning(c *cli.Context) {
	ctx, cancel := context.WithTimeout(c.Context, 10*time.Second)
	defer cancel()
	var left []string
	if active, err := units.ActiveSockets(ctx); err == nil {
		left = append(left, active...)
	}
	var engines []string
	if live, err := liveEngineScopes(ctx); err == nil {
		for _, s := range live {
			engines = append(engines, s.Name)
		}
	}
	if len(left) == 0 && len(engines) == 0 {
		return
	}
	msg := "mosaicctl: --force left running from the removed unit files:"
	if len(left) > 0 {
		msg += fmt.Sprintf(" conversation sockets %s (`systemctl --user stop %s`, and each one's mosaic-conv@ID.service);", strings.Join(left, ", "), strings.Join(left, " "))
	}
	if len(engines) > 0 {
		msg += fmt.Sprintf(" engine scopes %s (a proven stop: `mosaicctl install` again, then `mosaicctl stop --take --yes ID`; without a proof: `systemctl --user stop %s`);", strings.Join(engines, ", "), strings.Join(engines, " "))
	}
	fmt.Fprintln(os.Stderr, strings.TrimSuffix(msg, ";"))
}
