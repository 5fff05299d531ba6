package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/units"
)

// refuseUnseen refuses an install whose units the user manager does not
// load from dir, where install wrote them. The unit directory follows
// this process's XDG_CONFIG_HOME, which a shell's rc file can set and the
// user manager never see: the files are then written, the reload
// succeeds, and no conversation can start. mosaic-web.socket stands for
// them all: the manager can be asked about it without an instance name.
func refuseUnseen(ctx context.Context, dir string) error {
	l, err := units.LoadedUnit(ctx, units.WebSocketUnit)
	if err != nil {
		return fmt.Errorf("install wrote %s, but cannot tell whether the user manager loads the units from there: %w", dir, err)
	}
	if sameFile(l.FragmentPath, filepath.Join(dir, units.WebSocketUnit)) {
		return nil
	}
	v, err := units.ReadManagerView(ctx)
	if err != nil {
		return fmt.Errorf("install wrote %s, but the user manager loads %s from %q (%s): %w", dir, units.WebSocketUnit, l.FragmentPath, l.LoadState, err)
	}
	return unseen(dir, l, v.UnitPath)
}

// unseen says why the user manager did not load the units from dir and
// what to do.
func unseen(dir string, l units.Loaded, unitPath []string) error {
	listed := slices.ContainsFunc(unitPath, func(d string) bool { return sameFile(d, dir) })
	switch {
	case !listed:
		return protocol.Refuse(protocol.CodeConfiguration,
			"install wrote the units to %s, but the user manager does not read unit files there, so it cannot start a conversation "+
				"(its unit search path: %s); `mosaicctl doctor` compares this shell's XDG_CONFIG_HOME and XDG_STATE_HOME with the "+
				"user manager's and says how to make them agree; then run `mosaicctl install` again (`mosaicctl uninstall --unit-dir %s` "+
				"removes these files)",
			dir, strings.Join(unitPath, " "), dir)
	case l.FragmentPath != "":
		return protocol.Refuse(protocol.CodeConfiguration,
			"install wrote the units to %s, but the user manager loads %s from %s, which comes first in its unit search path (%s): "+
				"move that file away, or install into its directory",
			dir, units.WebSocketUnit, l.FragmentPath, strings.Join(unitPath, " "))
	default:
		return protocol.Refuse(protocol.CodeConfiguration,
			"install wrote the units to %s, but the user manager did not load %s from there (load state %s): "+
				"run `systemctl --user daemon-reload`, then `mosaicctl doctor`",
			dir, units.WebSocketUnit, l.LoadState)
	}
}

// sameFile says whether a and b name one file, links resolved; "" is no
// file.
func sameFile(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	x, err := os.Stat(a)
	if err != nil {
		return false
	}
	y, err := os.Stat(b)
	return err == nil && os.SameFile(x, y)
}
