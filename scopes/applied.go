package scopes

import (
	"context"
	"fmt"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
)

// Applied is what systemd holds for a live engine scope's resource
// properties, read back over D-Bus: the values in force, with
// percentages already resolved by systemd. math.MaxUint64 is infinity
// (systemd's "no limit").
type Applied struct {
	Unit               string
	MemoryMax          uint64
	TasksMax           uint64
	CPUQuotaPerSecUSec uint64
}

// Applied reads unit's MemoryMax, TasksMax and CPUQuotaPerSecUSec.
func (m *Manager) Applied(ctx context.Context, unit string) (Applied, error) {
	a := Applied{Unit: unit}
	err := m.bus.do(ctx, func(c *sddbus.Conn) error {
		props, err := c.GetUnitTypePropertiesContext(ctx, unit, "Scope")
		if err != nil {
			return err
		}
		for name, dst := range map[string]*uint64{"MemoryMax": &a.MemoryMax, "TasksMax": &a.TasksMax, "CPUQuotaPerSecUSec": &a.CPUQuotaPerSecUSec} {
			v, ok := props[name].(uint64)
			if !ok {
				return fmt.Errorf("property %s of %s is %T, not a number", name, unit, props[name])
			}
			*dst = v
		}
		return nil
	})
	if err != nil {
		return Applied{}, fmt.Errorf("read the limits of %s: %w", unit, err)
	}
	return a, nil
}
