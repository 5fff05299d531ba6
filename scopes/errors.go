package scopes

import "errors"

// The errors of this package are classified with errors.Is; each is
// wrapped with the unit, cgroup or pid it concerns and the cause.
var (
	// Launch errors.

	// ErrUnitExists: a unit with the scope's name exists and stayed after
	// one reset-failed and retry (another live execution has the name).
	ErrUnitExists = errors.New("scope unit already exists")
	// ErrJobFailed: the start job ended with a result other than "done".
	ErrJobFailed = errors.New("scope start job did not end done")
	// ErrJobTimeout: the start job gave no result within Config.JobTimeout.
	ErrJobTimeout = errors.New("scope start job timed out")
	// ErrNotInScope: after the job, /proc/<pid>/cgroup did not name the
	// scope's engine cgroup, so the engine was never released.
	ErrNotInScope = errors.New("held child is not in the scope's engine cgroup")

	// Reasons a process is not taken as a member or not signalled.

	// ErrVanished: the process was gone before it could be identified.
	ErrVanished = errors.New("process vanished before it could be identified")
	// ErrPIDReused: the pid now names a process with another start time,
	// so it is not the process that was recorded and is never signalled.
	ErrPIDReused = errors.New("pid reused: start time differs from the recorded one")
	// ErrNotMember: the pid is no longer in the cohort's cgroup.
	ErrNotMember = errors.New("process is not in the cohort's cgroup")
)
