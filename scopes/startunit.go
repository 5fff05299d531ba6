package scopes

import (
	"context"
	"fmt"
	"github.com/mosaic-agents/mosaic/internal/procfs"
	"path"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
)

// startUnit creates the transient scope and waits for its job on a
// buffered channel (an unread unbuffered one would hang every later job on
// the connection, go-systemd #429). On UnitExists it resets the failed unit
// and retries once, as runc does.
func (m *Manager) startUnit(ctx context.Context, name string, props []sddbus.Property, heldPID int) error {
	for attempt := 0; ; attempt++ {
		ch := make(chan string, 1)
		err := m.bus.do(ctx, func(c *sddbus.Conn) error {
			_, err := c.StartTransientUnitContext(ctx, name, "fail", props, ch)
			return err
		})
		if isUnitExists(err) {
			// After a reconnect the unit may be ours from the first try.
			if cg, cerr := procfs.Cgroup2(heldPID); cerr == nil && path.Base(cg) == name {
				return nil
			}
			if attempt == 0 {
				_ = m.bus.resetFailed(ctx, name)
				continue
			}
			return fmt.Errorf("%w: %s: %w", ErrUnitExists, name, err)
		}
		if err != nil {
			return fmt.Errorf("start scope %s: %w", name, err)
		}
		t := time.NewTimer(m.cfg.JobTimeout)
		defer t.Stop()
		select {
		case r := <-ch:
			if r != "done" {
				return fmt.Errorf("%w: %s: job result %q", ErrJobFailed, name, r)
			}
			return nil
		case <-t.C:
			return fmt.Errorf("%w: %s: no job result after %v", ErrJobTimeout, name, m.cfg.JobTimeout)
		case <-ctx.Done():
			return fmt.Errorf("start scope %s: %w", name, ctx.Err())
		}
	}
}
