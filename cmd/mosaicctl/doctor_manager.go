package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	sd "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"

	"github.com/mosaic-agents/mosaic/units"
)

// checkUserManager asks the user manager over the user bus for its
// version and state: every conversation socket, controller and engine
// scope is one of its units.
func checkUserManager(ctx context.Context) (string, error) {
	c, err := sd.NewUserConnectionContext(ctx)
	if err != nil {
		return "", fmt.Errorf("no user manager on the user bus: %w", err)
	}
	defer c.Close()
	version, err := managerProperty(ctx, c, "Version")
	if err != nil {
		return "", err
	}
	state, err := managerProperty(ctx, c, "SystemState")
	if err != nil {
		return "", err
	}
	found := fmt.Sprintf("systemd %s user manager, %s", version, state)
	switch state {
	case "running":
		return found, nil
	case "degraded":
		if err := startLimitFinding(ctx, found); err != nil {
			return "", err
		}
		return "", warnf("`systemctl --user --failed` lists the failed units; `systemctl --user reset-failed` clears them once understood",
			"%s: some user units failed", found)
	default:
		return "", warnf("wait for the user manager to finish starting, or see `systemctl --user status`", "%s", found)
	}
}

// startLimitFinding fails the check for conversations whose units
// systemd holds failed on a start limit (their controller failed at start
// again and again): they cannot start, and a client meets only a reset
// connection. nil when there are none, or when the manager cannot say
// (the degraded warning stands).
func startLimitFinding(ctx context.Context, found string) error {
	ids, err := units.StartLimitedConversations(ctx)
	if err != nil || len(ids) == 0 {
		return nil
	}
	var fix []string
	for _, id := range ids {
		fix = append(fix, fmt.Sprintf("`systemctl --user reset-failed %s %s`", units.ServiceUnit(id), units.SocketUnit(id)))
	}
	return failf(fmt.Sprintf("`journalctl --user -u %s -n 30` says why it failed; once that is fixed: %s",
		units.ServiceUnit(ids[0]), strings.Join(fix, ", ")),
		"%s: systemd stopped starting the controller of %s (start-limit-hit: it failed at start too often in a row), so every client is refused",
		found, strings.Join(ids, ", "))
}

// managerProperty reads a string property of the manager object.
func managerProperty(ctx context.Context, c *sd.Conn, name string) (string, error) {
	v, err := c.GetManagerProperty(name)
	if err != nil {
		return "", fmt.Errorf("read the user manager's %s: %w", name, err)
	}
	// go-systemd returns the variant's text form: strings are quoted.
	if s, err := strconv.Unquote(v); err == nil {
		return s, nil
	}
	return v, nil
}

// lingerDir is where logind records the users who linger.
const lingerDir = "/var/lib/systemd/linger"

// checkLinger reports whether this user's manager outlives their logins.
// Without lingering, logind stops the user manager when the last session
// ends, and the manager stops every unit it runs: the conversation
// sockets, the controllers and the engines' scopes (a stop that mosaic
// neither asked for nor proves).
func checkLinger(ctx context.Context) (string, error) {
	u, err := user.Current()
	if err != nil {
		return "", fmt.Errorf("who am I: %w", err)
	}
	on, how, err := lingering(ctx, lingerDir, u)
	if err != nil {
		return "", warnf("", "cannot tell whether %s lingers (%v): if not, every conversation ends when your last login does", u.Username, err)
	}
	if !on {
		return "", warnf("", "lingering is off for %s: when your last login session ends, systemd stops your user manager and "+
			"with it every conversation's socket, controller and engine; conversations do not outlive a login, nor start at boot",
			u.Username)
	}
	return fmt.Sprintf("lingering is on for %s (%s): conversations outlive your logins", u.Username, how), nil
}

// lingering reads logind's linger file for u, then logind's Linger
// property: the file is what logind reads at boot, the property what it
// does now (an admin may have removed the file by hand).
func lingering(ctx context.Context, dir string, u *user.User) (on bool, how string, err error) {
	p := filepath.Join(dir, u.Username)
	_, ferr := os.Stat(p)
	if ferr == nil {
		return true, p + " exists", nil
	}
	on, lerr := logindLinger(ctx, u.Uid)
	if lerr == nil {
		if on {
			return true, "logind's Linger property", nil
		}
		return false, "", nil
	}
	if errors.Is(ferr, fs.ErrNotExist) {
		return false, "", nil // logind does not know the user: no session, no linger
	}
	return false, "", fmt.Errorf("%s: %v; logind: %v", p, ferr, lerr)
}

// logindLinger asks systemd-logind over the system bus whether uid
// lingers.
func logindLinger(ctx context.Context, uid string) (bool, error) {
	conn, err := dbus.ConnectSystemBus(dbus.WithContext(ctx))
	if err != nil {
		return false, err
	}
	defer conn.Close()
	path := dbus.ObjectPath("/org/freedesktop/login1/user/_" + strings.TrimSpace(uid))
	v, err := conn.Object("org.freedesktop.login1", path).GetProperty("org.freedesktop.login1.User.Linger")
	if err != nil {
		return false, err
	}
	on, ok := v.Value().(bool)
	if !ok {
		return false, fmt.Errorf("logind's Linger is %s, not a boolean", v.Signature())
	}
	return on, nil
}
