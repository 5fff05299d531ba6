package scopes

import (
	"context"
	"fmt"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	"golang.org/x/sys/unix"
)

// ScopeState asks the user manager for the state of the scope unit of one
// execution, named as UnitName names it: a unit the manager does not know
// reads LoadState "not-found". Without a user manager it fails: nothing
// was observed.
func (m *Manager) ScopeState(ctx context.Context, conversation, execution string) (string, UnitState, error) {
	name, err := UnitName(conversation, execution)
	if err != nil {
		return "", UnitState{}, err
	}
	st, err := m.bus.unitState(ctx, name)
	if err != nil {
		return name, UnitState{}, fmt.Errorf("read the state of %s: %w", name, err)
	}
	return name, st, nil
}

// KillUnreleased asks the user manager to send SIGKILL to every process of the
// scope unit of one execution. It is for a launch that never released its
// engine, whose scope holds only mosaic's own held child and anchor (the
// held child ignores SIGTERM, so a stop job would wait out the scope's
// stop timeout for nothing); a unit the manager does not know holds
// nothing. The caller observes the unit again afterwards: the signal is
// not the proof.
func (m *Manager) KillUnreleased(ctx context.Context, conversation, execution string) error {
	name, err := UnitName(conversation, execution)
	if err != nil {
		return err
	}
	err = m.bus.do(ctx, func(c *sddbus.Conn) error {
		return c.KillUnitWithTarget(ctx, name, sddbus.All, int32(unix.SIGKILL))
	})
	// The manager's own refusals (no such unit, no process left to kill)
	// say the scope holds nothing; the observation after decides.
	if isDBusError(err, "org.freedesktop.systemd1.NoSuchUnit") || isDBusError(err, "org.freedesktop.systemd1.NoSuchProcess") {
		return nil
	}
	if err != nil {
		return fmt.Errorf("kill %s: %w", name, err)
	}
	return nil
}
