package units

import (
	"context"
	"fmt"
	"sort"

	sd "github.com/coreos/go-systemd/v22/dbus"
)

// SocketPattern matches every conversation socket unit.
const SocketPattern = "mosaic-conv@*.socket"

// connect dials the calling user's manager over the user bus, with a hint
// where there is none (no dbus-user-session, or no user manager running).
func connect(ctx context.Context) (*sd.Conn, error) {
	c, err := sd.NewUserConnectionContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("connect to the systemd user manager: %w "+
			"(is `systemctl --user` working? it needs a running user manager and the dbus-user-session package)", err)
	}
	return c, nil
}

// Reload asks the user manager to reload unit files (daemon-reload).
func Reload(ctx context.Context) error {
	c, err := connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.ReloadContext(ctx); err != nil {
		return fmt.Errorf("reload the user manager: %w", err)
	}
	return nil
}

// ActiveSockets lists conversation socket units that are not inactive.
func ActiveSockets(ctx context.Context) ([]string, error) {
	c, err := connect(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	units, err := c.ListUnitsByPatternsContext(ctx, nil, []string{SocketPattern})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", SocketPattern, err)
	}
	var names []string
	for _, u := range units {
		if u.ActiveState != "inactive" && u.ActiveState != "failed" {
			names = append(names, u.Name)
		}
	}
	sort.Strings(names)
	return names, nil
}

// SocketUnit is the socket unit of conversation id.
func SocketUnit(id string) string { return "mosaic-conv@" + id + ".socket" }

// ServiceUnit is the controller service unit of conversation id.
func ServiceUnit(id string) string { return "mosaic-conv@" + id + ".service" }

// StartSocket starts conversation id's socket unit and waits for the job.
// Starting a socket starts no controller: that waits for the first client.
func StartSocket(ctx context.Context, id string) error {
	c, err := connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	name := SocketUnit(id)
	done := make(chan string, 1)
	if _, err := c.StartUnitContext(ctx, name, "replace", done); err != nil {
		return fmt.Errorf("start unit %q: %w (are the units installed? `mosaicctl install`)", name, err)
	}
	select {
	case result := <-done:
		if result != "done" {
			return fmt.Errorf("start unit %q: job %s (see `systemctl --user status %s`)", name, result, name)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("start unit %q: %w", name, ctx.Err())
	}
}
