// Package claims is the writer-claim record (brief §2): at most one
// non-stopped claim holds a seat tuple (seat, project, workspace) or a
// native session identity, and only a verified proof frees one.
//
// # Layout
//
// A claim has two keys, always taken seat first, then session. Each key is
// a directory under the claim root, named by the SHA-256 of the key (no
// part of a key ever becomes a path component):
//
//	<root>/seat/<sha256 of canonical JSON {"project","seat","workspace"}>/r0000000001.json
//	<root>/session/<sha256 of the session id>/r0000000001.json
//
// Each revision is a write-once file r<10 digits>.json holding one Record
// in canonical JSON. The current state of a key is its highest revision.
// Revisions form a gapless run r1..rN; no file is ever rewritten, renamed
// over or deleted.
//
// # Why temp file plus link(2)
//
// A revision is written to a fresh temp file in the key directory
// (O_EXCL|O_CREAT|O_WRONLY, a name no reader looks at), written fully and
// fsynced; then link(2) gives it its final name, which fails with EEXIST if
// the name exists; then the directory is fsynced. So:
//
//   - the final name only ever names a complete, fsynced revision: a crash
//     at any step leaves the old state or the new one, never half a file;
//   - the final name is created exclusively, exactly like O_EXCL on the
//     final name, so of two writers computing the same next revision
//     exactly one wins. That exclusive create is the only lock: no flock,
//     nothing in memory, nothing that a crash can leave held.
//
// The alternative, O_EXCL on the final name and treating a short newest
// file as corrupt, makes every crash between create and fsync a corrupt
// key that needs a person. link(2) works on every local Linux filesystem,
// where renameat2(RENAME_NOREPLACE) does not. A crash can leave a stale
// temp file; readers ignore it.
//
// A final file that still fails to decode or validate (external damage), a
// missing revision in the run, or a record whose key does not match its
// directory makes the key corrupt: ErrCorrupt, refused unsafe-replacement,
// never read as free. The reader never falls back to an older revision:
// that could turn a damaged `active` into the `stopped` before it.
//
// # Two keys and crashes
//
// Every claim revision is written under the seat key first, then the
// session key, with the same content (a per-claim Seq, a claim id). The
// seat key therefore always holds a claim's latest revision, and every read
// settles the keys before deciding anything: a session key that lags its
// claim's seat key is rolled forward by copying the revision across; a
// reservation that reached the seat key but not the session key is
// completed if the session key is free, or released (stopped, unlaunched
// proof) once its writer is gone if another claim took the session key.
// Settling writes are ordinary exclusive revisions, so settlers, the
// original writer and competing controllers can only agree. A crash at any
// step thus leaves the claim's old revision or its new one, and never two
// non-stopped claims on one key.
//
// # States and proofs
//
// reserved -> (BeginLaunch) -> active (Activate, with the engine
// incarnation) -> stopping
// (BeginStop) -> stopped (Stop, with a proof), and uncertain from any of
// the first three. `stopped` needs a proofs.CohortProof or
// proofs.BootProof that verifies offline and is about the claim's own
// execution (conversation, execution, boot id, cgroup), stored whole in
// the revision and re-verified on every read; a `stopped` revision whose
// proof does not verify is "stopped without proof" and frees nothing. The
// other proofs are ProofUnlaunched, for a reservation whose launch never
// began, and ProofWithdrawn, for a launch that never released its engine
// (below). The controller calls BeginLaunch (recording itself as Launcher)
// before it asks the scope launcher for anything, and Activate once the
// launcher returns the incarnation. A reservation without Launcher never
// ran an engine and is released when its controller is gone; one with
// Launcher may have, so it becomes uncertain and needs a cohort proof for
// its execution's scope (or a boot proof for the launcher's boot), unless
// it never recorded an incarnation: then it may be withdrawn.
//
// # Withdrawing a launch that never released its engine
//
// A launch can fail after BeginLaunch and before Activate: the engine's
// binary is gone at exec lookup, the scope cannot be created or placed,
// the controller dies. Such a claim names no cgroup or pid, so no cohort
// proof can be built for it, and before Withdraw it stayed uncertain
// until a reboot. Claim.Withdraw ends it stopped with a ProofWithdrawn
// record. Why that is sound: the launcher's BeforeRelease is Activate, and
// the held child execs the engine only after Activate's revision is
// published under the seat key, which is never rewritten and always holds
// the claim's latest revision; so a current revision with Launcher and no
// Engine means the held child was never told to run the engine, and no
// agent code ran. Two more conditions close what that leaves open: the
// launcher is gone or is the withdrawing controller (a live launcher could
// still create the scope; its Activate would then lose to the withdrawn
// revision, refused stale-generation, and its launch undoes itself), and
// the user manager lists the execution's scope unit (named from the
// revision's own conversation and execution) as inactive or failed in the
// launcher's boot, so no held child or anchor of the launch lingers (a
// unit it does not know reads not-found and inactive; not-found alone
// proves nothing, a running unit whose file is gone reads it too). The record states exactly those observations (unit name,
// load and active state, boot id, time) with basis "no-incarnation", and
// is re-checked on every read like any proof: a withdrawn record on a
// revision that records an incarnation frees nothing. It is deliberately
// not a proofs.Proof: `proof verify` and the audit never count it as a
// cohort proof. The safer alternative considered, stopping the unit and
// proving its cohort, needs the cohort record a failed launch may never
// have written; killing an unrecorded scope by name is left to the user,
// whom the way out tells which unit to stop.
//
// An incarnation may record its cgroup's kernel id (Process.CgroupID); a
// cohort proof must then name the same id, so a cgroup re-created at the
// same path can never stand in for the engine's. A Stop whose write failed
// part way (claim-store: the store full or read-only; the seat key written
// and the session key not, or a link that landed before a failed fsync)
// may be called again with the same proof: it settles the keys instead of
// refusing claim-state, so the caller can retry until the store takes it.
//
// No method releases a claim on disconnect, agent_settled, EOF, SIGTERM,
// idle or an abort reply: there is no such method.
//
// # Leaf and Written: what a stopped revision says of the session file
//
// Leaf is the leaf at launch (Acquire), and on a hibernate's stopped
// revision the leaf the conversation was on (the wake relaunches on it);
// Stop does not change it, so claims.Resume and the wake read it as
// before. Written is separate on purpose: Leaf can name an entry Pi holds
// only in memory (a new session's startup entries, before the lazy first
// write), so a non-empty Leaf does not mean a file was written. Written is
// the header id of a session file seen at the session path while the
// claim held it: set at Acquire when the launch found the file, and by
// StopVouched or Hibernate when the controller saw the engine write it;
// kept by every later revision. A stopped claim keyed new:<conversation>
// with Written set and its file missing is a session that exists
// somewhere else, not a new one: the controller refuses to recover it as
// new (target), after a restart too, since the evidence is in the store.
// A controller that never saw the file (it was written and moved away
// between two polls of the session watch, or while no controller ran)
// records nothing, and that gap is the one place the old reading stays.
//
// # Handover: what a restarting controller vouched for
//
// A controller restarted while its engine runs (F19) hands the next one
// the session bytes it vouched for last, and the latest announcements of
// its engine connection (Announced: the lines still to come of what it
// read and sent), on an active revision of its own (Handover); the next
// Reattach, or a Recover of it, takes them (Handed, HandedAnnounced) and
// writes a revision without them. Alternatives weighed: a file of the
// controller's own beside the store (one more thing to keep consistent
// with the claim, and nothing says which controller wrote it); the fd
// store (a memfd among the engine's descriptors: read before the claim
// is re-attached, so by a controller that does not hold it yet); marks
// written at every vouch (a store write per poll of a busy engine). The
// revision is written once per restart, names its writer, and the one
// Reattach that can use it consumes it, so a controller that crashes
// later never hands over an older, shorter mark as its own.
//
// # Refusals
//
// Refusals are *protocol.Refusal with the brief's codes: already-active
// (W1, W2, W4), unsafe-replacement (W3, corrupt records), stale-generation
// (a handle lost a race), stop-proof, engine-pin-mismatch and target (W9),
// claim-state (a transition not allowed), claim-store (the root cannot be
// read or written: read-only, full, permission).
package claims
