package scopes

import (
	"fmt"
	"path"

	"github.com/mosaic-agents/mosaic/proofs"
)

// Cohort says what contains an engine and its descendants. It is plain
// data, meant to be stored in the writer claim so a restarted controller can
// Reattach and resume a stop.
type Cohort struct {
	// Kind is proofs.KindScope, or proofs.KindProcessGroup for the
	// fallback, whose stops can never reach stopped.
	Kind proofs.Kind `json:"kind"`
	// Reason explains a process-group fallback (why, and what it means).
	Reason       string `json:"reason,omitempty"`
	Conversation string `json:"conversation"`
	Execution    string `json:"execution"`
	Unit         string `json:"unit,omitempty"`
	InvocationID string `json:"invocation_id,omitempty"`
	ScopeCgroup  string `json:"scope_cgroup,omitempty"` // the unit's ControlGroup
	Cgroup       string `json:"cgroup,omitempty"`       // ScopeCgroup/engine: the cohort
	BootID       string `json:"boot_id"`
	PID          int    `json:"pid"`        // the engine; its process group in the fallback
	StartTime    uint64 `json:"start_time"` // the engine's, clock ticks since boot
	AnchorPID    int    `json:"anchor_pid,omitempty"`
	AnchorStart  uint64 `json:"anchor_start,omitempty"`
	// Confinement is the evidence of the engine's confinement, read before
	// it ran (see proofs.Confinement); Confined false says why not. A
	// cohort recorded without it counts as unconfined.
	Confinement proofs.Confinement `json:"confinement"`

	// CgroupID is the kernel id of Cgroup (its directory's inode), so a
	// stop can tell our cgroup from a later one at the same path.
	CgroupID uint64 `json:"cgroup_id,omitempty"`
}

// engineCgroup is the cgroup a member must be in or below, with its id
// where the launch recorded it.
func (c *Cohort) engineCgroup() cgroupRef { return cgroupRef{Path: c.Cgroup, ID: c.CgroupID} }

// freezeCgroup is the cgroup the kill phase freezes: the scope's, which
// no process of the cohort can name or thaw (see freezeKill).
func (c *Cohort) freezeCgroup() string { return c.ScopeCgroup }

// CohortOf rebuilds a scope Cohort from what a writer claim records about
// an incarnation: conversation, execution, boot id, engine pid, start time
// and engine cgroup. The InvocationID is then unknown; the kill phase takes
// the unit's current one (an execution id names one launch only) and notes
// it.
func CohortOf(conversation, execution, bootID string, pid int, startTime uint64, cgroup string) (Cohort, error) {
	name, err := UnitName(conversation, execution)
	if err != nil {
		return Cohort{}, err
	}
	if cgroup == "" {
		return Cohort{Kind: proofs.KindProcessGroup, Reason: PGroupReason, Conversation: conversation,
			Execution: execution, BootID: bootID, PID: pid, StartTime: startTime}, nil
	}
	scope := path.Dir(cgroup)
	if path.Base(cgroup) != EngineSubgroup || path.Base(scope) != name {
		return Cohort{}, fmt.Errorf("cgroup %q is not the engine cgroup of %s", cgroup, name)
	}
	return Cohort{Kind: proofs.KindScope, Conversation: conversation, Execution: execution, Unit: name,
		ScopeCgroup: scope, Cgroup: cgroup, BootID: bootID, PID: pid, StartTime: startTime,
		Confinement: proofs.Confinement{Reason: "not recorded: the cohort was rebuilt from the claim alone"}}, nil
}
