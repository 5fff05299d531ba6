package units

import (
	"context"
	"fmt"
	"sort"
	"time"

	sd "github.com/coreos/go-systemd/v22/dbus"

	"github.com/mosaic-agents/mosaic/internal/userbus"
	"github.com/mosaic-agents/mosaic/protocol"
)

// SocketPattern matches every conversation socket unit.
const SocketPattern = "mosaic-conv@*.socket"

// Reload asks the user manager to reload unit files (daemon-reload).
func Reload(ctx context.Context) error {
	err := userbus.Default().Do(ctx, func(c *sd.Conn) error { return c.ReloadContext(ctx) })
	if err != nil {
		return fmt.Errorf("reload the user manager: %w", err)
	}
	return nil
}

// ActiveSockets lists conversation socket units that are not inactive.
func ActiveSockets(ctx context.Context) ([]string, error) {
	return ActiveSocketsOn(ctx, userbus.Default())
}

// ActiveSocketsOn is ActiveSockets of the manager b reaches.
func ActiveSocketsOn(ctx context.Context, b *userbus.Bus) ([]string, error) {
	var names []string
	err := b.Do(ctx, func(c *sd.Conn) error {
		units, err := c.ListUnitsByPatternsContext(ctx, nil, []string{SocketPattern})
		if err != nil {
			return err
		}
		names = names[:0]
		for _, u := range units {
			if u.ActiveState != "inactive" && u.ActiveState != "failed" {
				names = append(names, u.Name)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", SocketPattern, err)
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
func StartSocket(ctx context.Context, id string) error { return StartUnit(ctx, SocketUnit(id)) }

// StartUnit starts the unit name and waits for the job.
func StartUnit(ctx context.Context, name string) error {
	done := make(chan string, 1)
	err := userbus.Default().Do(ctx, func(c *sd.Conn) error {
		_, err := c.StartUnitContext(ctx, name, "replace", done)
		return err
	})
	if userbus.IsError(err, "org.freedesktop.systemd1.NoSuchUnit") {
		return protocol.Wrap(protocol.CodeConfiguration, err, "start unit %q: the user manager does not see mosaic's units: `mosaicctl doctor` says why (not installed, or since `mosaicctl uninstall`: `mosaicctl install`)", name)
	}
	if err != nil {
		return fmt.Errorf("start unit %q: %w (`mosaicctl doctor` checks the units and the user manager)", name, err)
	}
	return awaitJob(ctx, fmt.Sprintf("start unit %q", name), name, done)
}

// StopUnits stops each of names that is loaded and active, and waits for
// the jobs; it returns the names it stopped.
func StopUnits(ctx context.Context, names ...string) ([]string, error) {
	var stopped []string
	err := userbus.Default().Do(ctx, func(c *sd.Conn) error {
		stopped = stopped[:0]
		units, err := c.ListUnitsByNamesContext(ctx, names)
		if err != nil {
			return err
		}
		for _, u := range units {
			if u.ActiveState == "inactive" || u.ActiveState == "failed" {
				continue
			}
			done := make(chan string, 1)
			if _, err := c.StopUnitContext(ctx, u.Name, "replace", done); err != nil {
				return fmt.Errorf("stop %s: %w", u.Name, err)
			}
			if err := awaitJob(ctx, "stop "+u.Name, u.Name, done); err != nil {
				return err
			}
			stopped = append(stopped, u.Name)
		}
		return nil
	})
	return stopped, err
}

// RestartStale restarts the unit name, and waits for the job, only if it
// is active and entered that state before since: a controller started
// since then read whatever changed at its start, and may be launching an
// engine with it, which a restart would cut short. It says whether it
// restarted. The check and the restart are one D-Bus call each on one
// connection, never repeated: a restart whose reply was lost is not made
// twice (the error says what to check).
func RestartStale(ctx context.Context, name string, since time.Time) (bool, error) {
	restarted := false
	checked := false
	err := userbus.Default().Do(ctx, func(c *sd.Conn) error {
		if checked {
			// The connection dropped after the check: whether the restart
			// was asked is unknown, so it is not asked again.
			return fmt.Errorf("restart %s: the user manager's connection dropped; `systemctl --user status %s` shows whether it restarted", name, name)
		}
		checked = true
		list, err := c.ListUnitsByNamesContext(ctx, []string{name})
		if err != nil {
			return err
		}
		if len(list) != 1 || list[0].ActiveState != "active" {
			return nil
		}
		p, err := c.GetUnitPropertyContext(ctx, name, "ActiveEnterTimestamp")
		if err != nil {
			return err
		}
		usec, ok := p.Value.Value().(uint64)
		if !ok || !time.UnixMicro(int64(usec)).Before(since) {
			return nil
		}
		done := make(chan string, 1)
		if _, err := c.RestartUnitContext(ctx, name, "replace", done); err != nil {
			return fmt.Errorf("restart %s: %w", name, err)
		}
		if err := awaitJob(ctx, "restart "+name, name, done); err != nil {
			return err
		}
		restarted = true
		return nil
	})
	return restarted, err
}

// awaitJob waits for the job whose result done receives: what names the
// request in the error, unit the unit whose status says why a job
// failed.
func awaitJob(ctx context.Context, what, unit string, done <-chan string) error {
	select {
	case result := <-done:
		if result != "done" {
			return fmt.Errorf("%s: job %s (see `systemctl --user status %s`)", what, result, unit)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", what, ctx.Err())
	}
}
