package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/mosaic-agents/mosaic/internal/userbus"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/scopes"
	"github.com/mosaic-agents/mosaic/units"
)

// userRuntimeRoot holds each logged-in or lingering user's runtime
// directory, /run/user/<uid>, where logind puts it.
const userRuntimeRoot = "/run/user"

// inUse is what one user's manager still runs of mosaic.
type inUse struct {
	who     string // "uid 1000 (alice)"
	sockets []string
	engines []string
}

// refuseGlobalInUse refuses a global uninstall while any running user
// manager has an active conversation socket or a live engine scope: the
// units in the global directory serve every user, and removing them under
// a running conversation leaves its socket activating a unit that is gone
// at the next reload, its engine without the conversation that can prove
// its stop. Only root can ask every user's manager (each private socket
// admits root and its own uid), so anyone else is refused rather than
// told "nothing runs" after asking only themselves.
func refuseGlobalInUse(ctx context.Context) error {
	if os.Getuid() != 0 {
		return usageError("uninstall --global checks every user's manager for running conversations, which needs root: run it with sudo (or pass --force to uninstall without checking)")
	}
	managers, err := filepath.Glob(filepath.Join(userRuntimeRoot, "*", "systemd", "private"))
	if err != nil {
		return err
	}
	var busy []inUse
	for _, sock := range managers {
		u, err := askManager(ctx, sock)
		if err != nil {
			return fmt.Errorf("uninstall --global: %w; pass --force to uninstall without checking", err)
		}
		if len(u.sockets)+len(u.engines) > 0 {
			busy = append(busy, u)
		}
	}
	return refuseBusy(busy)
}

// askManager lists what the user manager on the private socket sock runs
// of mosaic. A socket nobody listens on is a manager that has ended.
func askManager(ctx context.Context, sock string) (inUse, error) {
	uidText := filepath.Base(filepath.Dir(filepath.Dir(sock)))
	u := inUse{who: "uid " + uidText}
	if uid, err := strconv.Atoi(uidText); err == nil {
		if pw, err := user.LookupId(strconv.Itoa(uid)); err == nil {
			u.who += " (" + pw.Username + ")"
		}
	}
	b := userbus.NewDirect(sock)
	defer b.Close()
	sockets, err := units.ActiveSocketsOn(ctx, b)
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) {
		return u, nil
	}
	if err != nil {
		return u, fmt.Errorf("ask the user manager of %s (%s): %w", u.who, sock, err)
	}
	live, err := scopes.EngineScopesOn(ctx, b, "")
	if err != nil {
		return u, fmt.Errorf("ask the user manager of %s (%s): %w", u.who, sock, err)
	}
	u.sockets = sockets
	for _, s := range live {
		u.engines = append(u.engines, s.Name)
	}
	return u, nil
}

// refuseBusy names, user by user, what still runs: engines first, as
// they are what a removal would leave without a provable stop.
func refuseBusy(busy []inUse) error {
	if len(busy) == 0 {
		return nil
	}
	sort.Slice(busy, func(i, j int) bool { return busy[i].who < busy[j].who })
	var engines, sockets []string
	for _, u := range busy {
		if len(u.engines) > 0 {
			engines = append(engines, u.who+": "+strings.Join(u.engines, ", "))
		}
		if len(u.sockets) > 0 {
			sockets = append(sockets, u.who+": "+strings.Join(u.sockets, ", "))
		}
	}
	if len(engines) > 0 {
		return protocol.Refuse(protocol.CodeEngineAlive, "uninstall --global: engines still run in users' managers (%s); each user stops them first with `mosaicctl stop --take --yes ID` (or pass --force)",
			strings.Join(engines, "; "))
	}
	return protocol.Refuse(protocol.CodeSocketActive, "uninstall --global: conversation sockets are active in users' managers (%s); each user stops them first with `systemctl --user stop` of the socket (or pass --force)",
		strings.Join(sockets, "; "))
}
