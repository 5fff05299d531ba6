package scopes

import (
	"fmt"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"
)

func (m *Manager) properties(spec Spec, pids ...uint32) []sddbus.Property {
	desc := spec.Description
	if desc == "" {
		desc = fmt.Sprintf("mosaic engine, conversation %s, execution %s", spec.Conversation, spec.Execution)
	}
	props := []sddbus.Property{
		sddbus.PropDescription(desc),
		sddbus.PropSlice(m.cfg.Slice),
		sddbus.PropPids(pids...),
		// The engine and anchor live in sub-cgroups we create; systemd
		// must leave the subtree to us.
		{Name: "Delegate", Value: dbus.MakeVariant(true)},
		{Name: "CollectMode", Value: dbus.MakeVariant("inactive-or-failed")},
		// The anchor ignores SIGTERM: an outside `systemctl --user stop`
		// reaches SIGKILL after this long instead of the default 90 s.
		{Name: "TimeoutStopUSec", Value: dbus.MakeVariant(uint64(10 * time.Second / time.Microsecond))},
	}
	props = append(props, m.extraProps...)
	r := spec.Resources
	if r.MemoryMax > 0 {
		props = append(props, sddbus.Property{Name: "MemoryMax", Value: dbus.MakeVariant(r.MemoryMax)})
	}
	if r.TasksMax > 0 {
		props = append(props, sddbus.Property{Name: "TasksMax", Value: dbus.MakeVariant(r.TasksMax)})
	}
	if r.MemoryMaxScale > 0 {
		props = append(props, sddbus.Property{Name: "MemoryMaxScale", Value: dbus.MakeVariant(r.MemoryMaxScale)})
	}
	if r.TasksMaxScale > 0 {
		props = append(props, sddbus.Property{Name: "TasksMaxScale", Value: dbus.MakeVariant(r.TasksMaxScale)})
	}
	switch {
	case r.CPUQuotaPerSecUSec > 0:
		props = append(props, sddbus.Property{Name: "CPUQuotaPerSecUSec", Value: dbus.MakeVariant(r.CPUQuotaPerSecUSec)})
	case r.CPUQuota > 0:
		usec := uint64(r.CPUQuota * 10000) // 100% = 1 s of CPU per second
		props = append(props, sddbus.Property{Name: "CPUQuotaPerSecUSec", Value: dbus.MakeVariant(usec)})
	}
	return props
}
