package units

import (
	"context"
	"slices"
	"strings"

	sd "github.com/coreos/go-systemd/v22/dbus"

	"github.com/mosaic-agents/mosaic/internal/userbus"
)

// StartLimited reports whether systemd holds conversation id's units
// failed on a start limit: its controller failed at start more often than
// the service's StartLimitBurst= allows within StartLimitIntervalSec=
// (Restart= and socket activation both count), so the socket failed
// "service-start-limit-hit" and stopped listening; or the socket itself
// was started too often ("start-limit-hit": each client starts a failed
// socket again). systemd says so only in the unit's Result, which a
// client sees as a reset connection or a failed start job: the caller
// names the fix (`systemctl --user reset-failed`, after the cause).
func StartLimited(ctx context.Context, id string) (bool, error) {
	limited := false
	err := userbus.Default().Do(ctx, func(c *sd.Conn) error {
		for _, u := range [][2]string{{SocketUnit(id), "Socket"}, {ServiceUnit(id), "Service"}} {
			p, err := c.GetUnitTypePropertyContext(ctx, u[0], u[1], "Result")
			if err != nil {
				return err
			}
			switch p.Value.Value() {
			case "start-limit-hit", "service-start-limit-hit":
				limited = true
			}
		}
		return nil
	})
	return limited, err
}

// StartLimitedConversations lists the conversations whose units systemd
// holds failed on a start limit (StartLimited), by id, in order.
func StartLimitedConversations(ctx context.Context) ([]string, error) {
	var failed []sd.UnitStatus
	err := userbus.Default().Do(ctx, func(c *sd.Conn) error {
		var err error
		failed, err = c.ListUnitsByPatternsContext(ctx, []string{"failed"}, []string{"mosaic-conv@*.socket", "mosaic-conv@*.service"})
		return err
	})
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, u := range failed {
		id := strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(u.Name, "mosaic-conv@"), ".socket"), ".service")
		if slices.Contains(ids, id) {
			continue
		}
		if hit, err := StartLimited(ctx, id); err != nil {
			return nil, err
		} else if hit {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids, nil
}
