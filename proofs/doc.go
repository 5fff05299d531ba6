// Package proofs builds and checks the evidence that lets a writer claim
// reach `stopped`.
//
// A stop is `stopped` only with a proof. Two kinds exist:
//
//   - A CohortProof says that every process of one engine's systemd scope is
//     gone, on one of two bases (its `basis` field). `empty-observed`: the
//     complete membership enumerated from the scope's cgroup while frozen
//     (or while it read `populated 0` before and after, nothing left to
//     fork), a death observed for every member, and afterwards the cgroup itself
//     seen present with `populated 0`. `cgroup-removed`: the cgroup seen
//     gone (the kernel removes a cgroup only when no process is in it, and
//     cgroup2 cannot rename one), shown to be this execution's cgroup that
//     went (`removal`: ENOENT in systemd's view, or another cgroup id at the
//     path; the unit no longer our running invocation), with the death of
//     every member known by pid and start time (the engine, the anchor, the
//     TERM-phase members). It is built only by NewCohortProof from an
//     Observation, and NewCohortProof refuses anything less: a process-group
//     observation (a `setsid` child can leave a process group, so such an
//     observation can never be complete), a member whose death was not
//     observed, an absent or unreadable cgroup (absent is not empty), an
//     observation taken before a death, or an engine not shown confined.
//     An absent cgroup counts only with the removal evidence (basis
//     cgroup-removed, below); a proof written before bases existed has no
//     `basis` field and is held to the empty-observed checks, so stripping
//     the basis of a removal proof makes it fail.
//     The cgroup is the cohort only if nothing the engine started could
//     leave it or have a process started elsewhere: the proof carries the
//     Confinement evidence (the engine's own user, mount, pid and cgroup
//     namespaces, read against the controller's before the engine ran;
//     what was masked; the cgroup namespace's root, which must be the
//     cohort's cgroup; the Landlock scopes of the engine's domain, or why
//     none, optional fields of version 2 that an older verifier refuses
//     as unknown rather than ignores). Cohort proofs with it are version 2
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
