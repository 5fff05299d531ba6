// Package audit writes every decision of a controller (start, stop,
// admission, receipt, takeover, each binding and stop transition, proof,
// confirmation, launch, a foreign writer) and what peers did (connect,
// hello, refusal, disconnect) as structured journald entries, so
// `journalctl --user -u mosaic-conv@<id>.service MOSAIC_EVENT=takeover` is
// the audit trail.
//
// Each event kind has a stable MESSAGE_ID (journalctl MESSAGE_ID=...), and
// fields carry the MOSAIC_ prefix. packaging/catalog/mosaic.catalog explains
// each MESSAGE_ID in words for `journalctl -x`; a test keeps the two in
// step, so a new event kind needs its catalog entry. Where no journal is reachable (a
// developer running `serve --listen` in a terminal) entries go to stderr as
// JSON lines instead, so nothing is dropped silently.
//
// # An audit that a flood cannot silence
//
// journald rate-limits per unit and per priority pool, and on systemd 252
// to 257 every unit of a user manager shares one bucket: the one of
// user@UID.service (per-unit LogRateLimit* of a user unit are not read). A
// peer that floods the controller with bad lines could therefore make
// journald drop the decisions that follow. Three things keep them:
//
//   - Aggregation. Entries a peer's connection causes (connect, hello,
//     refusal, disconnect, the receipt of an exact retry) are counted per
//     (event, refusal code): the first
//     Burst of a Window are written whole, the rest become one entry
//     "N more" with MOSAIC_COUNT=N when the window ends, or before the next
//     decision, so the journal keeps the order of what happened. A flood of
//     20,000 refusals costs a few dozen entries, never 20,000. What the
//     engine's own output causes (Entry.Engine: a dialog it opened, or
//     settled by itself) repeats at the engine's will and is counted the
//     same way, per kind. Decisions are never aggregated, and neither is
//     anything the controller decides by itself (a refusal without a
//     connection).
//   - Priority. Decisions are written at notice, peer-caused entries at
//     info: `journalctl -p notice` lists the decisions alone. Both share
//     journald's notice/info pool, to which the aggregated peer entries
//     add at most Burst+1 per (event, code) and window (about a thousand
//     with every code the controller has; 21 for a flood of one code),
//     a tenth of journald's default burst; the unit template
//     sends the controller's stderr (and so the engine's) at warning with
//     level prefixes ignored, into another pool, so engine output cannot
//     crowd decisions out either.
//   - Bounds. No field is longer than MaxField (MESSAGE: MaxMessage) bytes:
//     longer values keep a prefix and say how much was cut, so peer text is
//     never journaled whole. The proof body (MOSAIC_PROOF, written by the
//     controller from its own record) is bounded by MaxProof; a larger one
//     is left out with MOSAIC_PROOF_OMITTED and its digest kept.
//
// What this cannot do: any process of the same user that can reach
// journald's sockets (the engine too, unless its confinement masks them)
// shares the bucket and can exhaust it. Loss then cannot be prevented, only
// detected: `mosaicctl audit` cross-checks every proof in the claim store
// against the journal and reports journald's "Suppressed N messages"
// notices, so a lost decision never reads as a clean audit.
//
// The alternatives weighed: a per-conversation journal namespace
// (LogNamespace=) needs a system unit and root; writing our own audit file
// next to the claims would be a second log a user must learn to read, and
// the claim store already is the durable record of every proof; raising
// journald's limits is the administrator's choice, not ours.
package audit
