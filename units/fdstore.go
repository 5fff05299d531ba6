package units

import (
	"context"
	"fmt"

	sd "github.com/coreos/go-systemd/v22/dbus"

	"github.com/mosaic-agents/mosaic/internal/userbus"
)

// StoredFDs is how many descriptors the file descriptor store of id's
// controller service holds now (NFileDescriptorStore): the manager drops
// one handed to it past FileDescriptorStoreMax= with a line in its own
// log only, so the controller counts.
func StoredFDs(ctx context.Context, id string) (int, error) {
	unit := ServiceUnit(id)
	var n int
	err := userbus.Default().Do(ctx, func(c *sd.Conn) error {
		p, err := c.GetServicePropertyContext(ctx, unit, "NFileDescriptorStore")
		if err != nil {
			return err
		}
		v, ok := p.Value.Value().(uint32)
		if !ok {
			return fmt.Errorf("a %s, not a uint32", p.Value.Signature())
		}
		n = int(v)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("read %s's NFileDescriptorStore: %w", unit, err)
	}
	return n, nil
}
