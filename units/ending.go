package units

import (
	"context"
	"fmt"
	"strings"

	sd "github.com/coreos/go-systemd/v22/dbus"

	"github.com/mosaic-agents/mosaic/internal/userbus"
)

// Ending is what the user manager is doing to a conversation's controller
// service when the controller is told to exit (SIGTERM): the job it runs
// on the unit then.
type Ending struct {
	// Restart: a restart of the service (restart, try-restart,
	// reload-or-restart, a restart of the socket propagated to it). The
	// fd store keeps the engine's descriptors for the next controller.
	Restart bool
	// Job is the job's type, "" when the unit has none (`systemctl kill`,
	// a signal from elsewhere): the service then ends as after a stop.
	Job string
}

// ServiceEnding asks the user manager which job it runs on conversation
// id's controller service. A restart is the one ending that keeps the
// engine's descriptors: a stop job, or none, ends the service for good,
// and the manager closes what its fd store holds.
func ServiceEnding(ctx context.Context, id string) (Ending, error) {
	unit := ServiceUnit(id)
	var e Ending
	err := userbus.Default().Do(ctx, func(c *sd.Conn) error {
		jobs, err := c.ListJobsContext(ctx)
		if err != nil {
			return err
		}
		e = Ending{}
		for _, j := range jobs {
			if j.Unit == unit {
				e.Job = j.JobType
			}
		}
		return nil
	})
	if err != nil {
		return Ending{}, fmt.Errorf("ask the user manager for the job on %s: %w", unit, err)
	}
	// systemd runs a restart's stop half under the restart job itself
	// (JOB_RESTART, or JOB_TRY_RESTART collapsed to it).
	e.Restart = strings.Contains(e.Job, "restart")
	return e, nil
}
