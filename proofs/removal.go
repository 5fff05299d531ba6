package proofs

import (
	"fmt"
	"path"
	"strings"
)

// Basis names the kernel fact a cohort proof rests on.
type Basis string

const (
	// BasisEmptyObserved: the membership was enumerated while the cgroup
	// was frozen, every member's death was observed, and then the cgroup
	// itself was read present with `populated 0`.
	BasisEmptyObserved Basis = "empty-observed"
	// BasisCgroupRemoved: the cohort's cgroup no longer exists. The
	// kernel refuses to remove a cgroup that holds a process (rmdir of a
	// populated cgroup fails with EBUSY) and cgroup2 cannot rename one, so
	// every process that was ever in it, known or not (a setsid tool child
	// included), had exited before it went. What the proof adds is that it
	// is this execution's cgroup that went (Removal.Seen, the cgroup id,
	// the view check) and that every member the launcher knew by pid and
	// start time, which could have left the cgroup before it went, is
	// dead too.
	BasisCgroupRemoved Basis = "cgroup-removed"
)

// How a removed cgroup was found gone (Removal.Seen).
const (
	// RemovedENOENT: nothing exists at the cgroup's path.
	RemovedENOENT = "enoent"
	// RemovedReplaced: the path holds a cgroup with another id. Two
	// cgroups never share a path at once, so ours was removed first.
	RemovedReplaced = "replaced"
)

// How a known member's death was observed (KnownDeath.How).
const (
	DeathReaped    = "reaped"     // the launcher, its parent, reaped it
	DeathExited    = "exited"     // its pidfd polled readable (exited, perhaps not yet reaped)
	DeathGone      = "gone"       // no process has its pid any more (pidfd_open: ESRCH)
	DeathPIDReused = "pid-reused" // its pid names a process with another start time
)

// Roles of the members a launcher knows by pid and start time.
const (
	RoleEngine = "engine" // the engine itself (the held child that exec'd it)
	RoleAnchor = "anchor" // the process that keeps the scope alive during a stop
)

// Removal is the evidence of a BasisCgroupRemoved proof: what was read
// when the cohort's cgroup was found gone, and the death of each member
// the launcher knew.
type Removal struct {
	// Seen is RemovedENOENT or RemovedReplaced.
	Seen string `json:"seen"`
	// SeenCgroupID is the id of the cgroup found at the path when
	// replaced; 0 for enoent.
	SeenCgroupID uint64 `json:"seen_cgroup_id"`
	// ManagerCgroup is the user manager's own cgroup (its ControlGroup,
	// read over D-Bus), found present through the same cgroup2 handle
	// just before the path was looked up: the lookup happened in the view
	// systemd names paths in, so an ENOENT is not an artefact of another
	// cgroup namespace. The cohort's cgroup lies below it.
	ManagerCgroup string `json:"manager_cgroup"`
	// The unit as read over D-Bus when the removal was observed: the load
	// and active state from one message, the invocation id from another
	// read at about the same moment ("" when the unit is gone, load state
	// not-found, or had none when asked).
	UnitLoadState    string `json:"unit_load_state"`
	UnitActiveState  string `json:"unit_active_state"`
	UnitInvocationID string `json:"unit_invocation_id"`
	// Known is every member the launcher knew by pid and start time (the
	// engine and the anchor), each with its observed death.
	Known []KnownDeath `json:"known"`
}

// KnownDeath is the observed death of a member known by pid and start time.
type KnownDeath struct {
	Role      string `json:"role"` // RoleEngine or RoleAnchor
	PID       int    `json:"pid"`
	StartTime uint64 `json:"start_time"` // clock ticks since boot
	How       string `json:"how"`        // Death*
	DiedAt    uint64 `json:"died_at_ns"` // CLOCK_BOOTTIME ns when the death was observed
}

// basisOf is the basis a proof states; a proof written before bases
// existed has none and is held to the empty-observed checks.
func basisOf(p *CohortProof) Basis {
	if p.Basis == "" {
		return BasisEmptyObserved
	}
	return p.Basis
}

// checkBasis adds the checks of the proof's basis: for empty-observed the
// cgroup read present and empty, for cgroup-removed the removal evidence.
func checkBasis(cs *checks, p *CohortProof) {
	b := basisOf(p)
	switch b {
	case BasisEmptyObserved:
		cs.add("basis", p.Removal == nil, ErrMalformed, "%s (stated %q), no removal evidence", b, p.Basis)
		cs.add("cgroup-empty", p.CgroupPresent && p.Populated == 0, emptySentinel(p),
			"cgroup present %t, populated %d", p.CgroupPresent, p.Populated)
	case BasisCgroupRemoved:
		cs.add("basis", p.Removal != nil, ErrMalformed, "%s, removal evidence present %t", b, p.Removal != nil)
		if p.Removal == nil {
			return
		}
		checkRemoval(cs, p, p.Removal)
	default:
		cs.add("basis", false, ErrMalformed, "basis %q is neither %s nor %s", p.Basis, BasisEmptyObserved, BasisCgroupRemoved)
	}
}

// checkRemoval checks the evidence that this execution's cgroup is gone
// and every known member with it.
func checkRemoval(cs *checks, p *CohortProof, r *Removal) {
	var okSeen bool
	switch r.Seen {
	case RemovedENOENT:
		okSeen = r.SeenCgroupID == 0
	case RemovedReplaced:
		// Only a recorded id can tell another cgroup at the path from ours.
		okSeen = p.CgroupID != 0 && r.SeenCgroupID != 0 && r.SeenCgroupID != p.CgroupID
	}
	cs.add("cgroup-removed", okSeen && !p.CgroupPresent && p.Populated == 0, ErrCgroupAbsent,
		"seen %q (cgroup id %d, found %d), cgroup present %t", r.Seen, p.CgroupID, r.SeenCgroupID, p.CgroupPresent)
	mc := r.ManagerCgroup
	cs.add("cgroup-view", strings.HasPrefix(mc, "/") && path.Clean(mc) == mc && strings.HasPrefix(p.Cgroup, strings.TrimSuffix(mc, "/")+"/"),
		ErrMalformed, "the cohort cgroup lies below the user manager's cgroup %q, read present in the same view", mc)
	// Our invocation must be over: the unit gone, another invocation under
	// its name, or ours inactive.
	ours := r.UnitInvocationID == p.InvocationID
	over := !ours || r.UnitActiveState == "inactive" || r.UnitActiveState == "failed"
	cs.add("unit-invocation", over && (!ours || r.UnitActiveState == p.ActiveState), ErrUnitActive,
		"unit %s load %q active %q invocation %q (ours %s)", p.Unit, r.UnitLoadState, r.UnitActiveState, r.UnitInvocationID, p.InvocationID)
	roles := map[string]int{}
	okKnown := true
	var bad []string
	for _, k := range r.Known {
		roles[k.Role]++
		valid := (k.Role == RoleEngine || k.Role == RoleAnchor) && k.PID > 0 && k.StartTime > 0
		switch k.How {
		case DeathReaped, DeathExited, DeathGone, DeathPIDReused:
		default:
			valid = false
		}
		if !valid || k.DiedAt < ticksToNanos(k.StartTime, p.ClockTicks) || k.DiedAt > p.ObservedAt {
			okKnown = false
			bad = append(bad, fmt.Sprintf("%s pid %d start %d %s at %d", k.Role, k.PID, k.StartTime, k.How, k.DiedAt))
		}
	}
	okKnown = okKnown && roles[RoleEngine] == 1 && roles[RoleAnchor] == 1 && len(r.Known) == 2
	cs.add("known-deaths", okKnown, ErrDeathUnobserved,
		"engine and anchor each observed dead after their start and before the observation at %d ns %v", p.ObservedAt, bad)
}
