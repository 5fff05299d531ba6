package proofs

import "time"

// Kind says what contained the processes an Observation describes.
type Kind string

const (
	// KindScope is a systemd transient scope: its cgroup holds every
	// descendant, including a child that called setsid.
	KindScope Kind = "scope"
	// KindProcessGroup is the fallback without a user manager. A member can
	// leave a process group (setsid), so membership can never be shown
	// complete and no CohortProof is ever built from it (brief K2).
	KindProcessGroup Kind = "pgroup"
)

// Observation is what a stop saw, filled in by the scope launcher's kill
// phase and handed to NewCohortProof. It is plain data: this package reads
// nothing from the host.
type Observation struct {
	Kind         Kind
	Stop         string // the stop record this observation serves
	Conversation string
	Execution    string
	Unit         string // e.g. mosaic-engine-<conversation>-<execution>.scope
	InvocationID string // the unit's InvocationID, 32 lowercase hex
	Cgroup       string // the scope's cgroup path below the cgroup2 root
	BootID       string // /proc/sys/kernel/random/boot_id when observed

	// ClockTicks is the USER_HZ that /proc/<pid>/stat start times count in.
	ClockTicks uint64

	// Members is the membership enumerated while the cgroup was frozen,
	// recursively through sub-cgroups.
	Members []MemberObservation
	// MembershipComplete is true only if the enumeration finished while the
	// cgroup was frozen (frozen 1 observed) and every cgroup.procs file of
	// the subtree was read without error.
	MembershipComplete bool

	// Cgroup state read from cgroup.events after every death.
	CgroupPresent bool // the directory and cgroup.events were read (false when removed)
	Populated     int  // the populated value read; meaningful only if CgroupPresent

	// ObservedAt is CLOCK_BOOTTIME nanoseconds when cgroup.events was read.
	ObservedAt   uint64
	ObservedWall time.Time // for people only

	// The unit's state at observation time.
	ActiveState string
	Result      string

	// Confinement is what kept the engine's descendants inside the cgroup,
	// recorded at launch. Without it no proof is built.
	Confinement Confinement

	// What the stop rests on (see Basis); "" means BasisEmptyObserved.
	Basis Basis
	// CgroupID is the cohort cgroup's kernel id (the inode of its
	// directory on cgroup2), recorded at launch; 0 if not recorded.
	CgroupID uint64
	// Removal is the evidence of BasisCgroupRemoved; nil otherwise.
	Removal *Removal
}

// MemberObservation is one process of the cohort.
type MemberObservation struct {
	PID       int
	StartTime uint64 // field 22 of /proc/<pid>/stat, in clock ticks since boot
	Comm      string
	// Died is true only if the member's death was observed (its pidfd
	// polled readable), not inferred from a signal being delivered.
	Died   bool
	DiedAt uint64 // CLOCK_BOOTTIME nanoseconds of the observed death
}
