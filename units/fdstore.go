package units

import (
	"context"
	"fmt"

	sd "github.com/coreos/go-systemd/v22/dbus"

	"github.com/mosaic-agents/mosaic/internal/userbus"
)

// StoredFDs is how many descriptors the file descriptor store of id's
// controller service holds now (NFileDescriptorStore) and how many it may
// (FileDescriptorStoreMax): the manager drops one handed to it past the
// limit with a line in its own log only, so the controller counts.
func StoredFDs(ctx context.Context, id string) (held, max int, err error) {
	unit := ServiceUnit(id)
	err = userbus.Default().Do(ctx, func(c *sd.Conn) error {
		var err error
		if held, err = serviceUint(ctx, c, unit, "NFileDescriptorStore"); err != nil {
			return err
		}
		max, err = serviceUint(ctx, c, unit, "FileDescriptorStoreMax")
		return err
	})
	if err != nil {
		return 0, 0, fmt.Errorf("read %s's fd store: %w", unit, err)
	}
	return held, max, nil
}

func serviceUint(ctx context.Context, c *sd.Conn, unit, name string) (int, error) {
	p, err := c.GetServicePropertyContext(ctx, unit, name)
	if err != nil {
		return 0, err
	}
	v, ok := p.Value.Value().(uint32)
	if !ok {
		return 0, fmt.Errorf("%s: a %s, not a uint32", name, p.Value.Signature())
	}
	return int(v), nil
}
