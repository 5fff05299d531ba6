// Package proofs builds and checks the evidence that lets a writer claim
// reach `stopped`.
//
// A stop is `stopped` only with a proof. Two kinds exist:
//
//   - A CohortProof says that every process of one engine's systemd scope is
//     gone: the complete membership enumerated from the scope's cgroup, a
//     death observed for every member, and afterwards the cgroup itself seen
//     present with `populated 0`. It is built only by NewCohortProof from an
//     Observation, and NewCohortProof refuses anything less: a process-group
//     observation (a `setsid` child can leave a process group, so such an
//     observation can never be complete), a member whose death was not
//     observed, an absent or unreadable cgroup (absent is not empty), an
//     observation taken before a death, or an engine not shown confined.
//     The cgroup is the cohort only if nothing the engine started could
//     leave it or have a process started elsewhere: the proof carries the
//     Confinement evidence (the engine's own user, mount, pid and cgroup
//     namespaces, read against the controller's before the engine ran;
//     what was masked; the cgroup namespace's root, which must be the
//     cohort's cgroup). Cohort proofs with it are version 2
//     (CohortVersion); a version 1 proof, written before engines were
//     confined, still decodes and keeps its digest, but fails its
//     `confinement` check, so `mosaicctl proof verify` says NOT verified
//     and why.
//   - A BootProof says the recorded execution ran under another boot id, so
//     every process of that boot is gone.
//
// Every proof carries a digest: the lowercase hex SHA-256 of its canonical
// JSON (see Canonical) without the digest field. Verify re-checks a proof
// offline and reports each check it made, so `mosaicctl proof verify` can
// print them. Verify proves internal consistency and integrity against
// accidental change; it is not authentication. Anyone who can write the file
// can recompute the digest, so trust in the producer is a separate question.
//
// Times are CLOCK_BOOTTIME nanoseconds, the same clock the kernel's process
// start time (field 22 of /proc/<pid>/stat, in clock ticks) counts on, so a
// death can be compared with a start and an observation with a death without
// trusting the wall clock. A wall-clock time is kept for people only.
package proofs
