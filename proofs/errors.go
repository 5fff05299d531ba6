package proofs

import "errors"

// Errors that say why no proof could be built or a proof does not verify.
// Constructors join every one that applies, so errors.Is finds each and the
// caller can record `uncertain` with the whole list.
var (
	ErrProcessGroup         = errors.New("process-group observation can never prove a cohort stopped")
	ErrIncompleteMembership = errors.New("membership not enumerated completely (while frozen, or while the cgroup read populated 0 before and after)")
	ErrCgroupAbsent         = errors.New("cgroup absent or unreadable (absent is not empty)")
	ErrCgroupPopulated      = errors.New("cgroup not observed empty (populated 0)")
	ErrDeathUnobserved      = errors.New("member death not observed")
	ErrDeathBeforeStart     = errors.New("member death time before its start")
	ErrObservedBeforeDeath  = errors.New("observation time before a member's death")
	ErrUnitActive           = errors.New("unit not inactive or failed at observation")
	ErrMalformed            = errors.New("malformed proof field")
	ErrSameBoot             = errors.New("recorded boot id equals the current one")
	ErrDigest               = errors.New("digest mismatch")
	ErrUnknownType          = errors.New("unknown proof type")
	ErrUnconfined           = errors.New("engine not shown confined: its processes may have left the cohort or had others start processes for them")
)
