package scopes

import (
	"context"
	"fmt"
	"sort"
	"strings"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/coreos/go-systemd/v22/unit"
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

// EngineScopes lists the loaded engine scopes of a conversation (running
// or stopping), in name order.
func (m *Manager) EngineScopes(ctx context.Context, conversation string) ([]string, error) {
	// systemd matches unit patterns with FNM_NOESCAPE: the "\x2d" of
	// an escaped '-' is matched as written.
	pattern := "mosaic-engine-" + unit.UnitNameEscape(conversation) + "-*.scope"
	var out []string
	err := m.bus.do(ctx, func(c *sddbus.Conn) error {
		us, err := c.ListUnitsByPatternsContext(ctx, []string{"active", "activating", "deactivating", "reloading"}, []string{pattern})
		if err != nil {
			return err
		}
		out = out[:0]
		for _, u := range us {
			if strings.HasSuffix(u.Name, ".scope") {
				out = append(out, u.Name)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list the engine scopes of %s: %w", conversation, err)
	}
	sort.Strings(out)
	return out, nil
}
