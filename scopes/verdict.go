package scopes

import (
	"fmt"
	"strings"

	"github.com/mosaic-agents/mosaic/proofs"
)

// verdict is the one place that says Stopped. It requires, of a scope
// observation: every member's death observed before the observation time,
// the unit inactive or failed, and one of the two bases: complete
// membership and the cgroup present with populated 0 (empty-observed), or
// the cgroup shown removed with every known member's death
// (cgroup-removed).
func verdict(o *proofs.Observation) (Outcome, string) {
	var why []string
	if o.Kind != proofs.KindScope {
		why = append(why, PGroupReason)
	}
	if ok, reason := o.Confinement.Holds(o.Cgroup); !ok {
		why = append(why, reason)
	}
	switch o.Basis {
	case proofs.BasisCgroupRemoved:
		if o.CgroupPresent || o.Removal == nil {
			why = append(why, "cgroup removal not observed")
		} else if o.Removal.Seen == proofs.RemovedReplaced && (o.CgroupID == 0 || o.Removal.SeenCgroupID == o.CgroupID) {
			why = append(why, "the cgroup at the path cannot be told apart from ours")
		} else if len(o.Removal.Known) != 2 {
			why = append(why, "the deaths of the engine and the anchor not both observed")
		}
	default:
		if !o.MembershipComplete {
			why = append(why, proofs.ErrIncompleteMembership.Error())
		}
		if !o.CgroupPresent {
			why = append(why, ErrCgroupAbsent.Error())
		} else if o.Populated != 0 {
			why = append(why, fmt.Sprintf("cgroup populated %d", o.Populated))
		}
	}
	for _, m := range o.Members {
		if !m.Died {
			why = append(why, fmt.Sprintf("death of pid %d (%s) not observed", m.PID, m.Comm))
		} else if m.DiedAt > o.ObservedAt {
			why = append(why, fmt.Sprintf("pid %d died after the observation", m.PID))
		}
	}
	if o.ActiveState != "inactive" && o.ActiveState != "failed" {
		why = append(why, fmt.Sprintf("unit %s is %q, not inactive", o.Unit, o.ActiveState))
	}
	if len(why) > 0 {
		return Uncertain, strings.Join(why, "; ")
	}
	return Stopped, ""
}
