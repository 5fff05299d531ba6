// Package queue is the durable per-conversation prompt queue: each admitted
// prompt is an item whose every state change is a write-once revision on
// disk, beside the writer claims and under the same rules (exclusive
// create through link(2), fsync of the file and of its directory:
// internal/atomicfile.WriteOnce, which the claims store uses too).
//
// # Layout
//
//	<state>/queue/<sha256 of the conversation id>/<item id>/r0000000001.json
//
// An item's current state is its highest revision; revisions form a
// gapless run r1..rN and none is rewritten. A revision holds the whole
// item: its frozen payloads (the admitted text and each edit, oldest
// first, each with its SHA-256, actor, connection and generation), its
// admission lineage (request, receipt, command fingerprint, admission
// order), its state and, once dispatched, the execution and the bus
// position it was dispatched after. So the original admission stays on
// disk after an edit, and a reader needs one file to know an item.
//
// # Choices where the contract is silent
//
//   - One directory per item rather than one log per queue: two
//     transitions of different items never contend, and retention removes
//     a finished item whole. Order is the admission sequence number kept
//     in every revision, not the directory listing.
//   - The store keeps nothing in memory and takes no lock: the controller
//     serialises transitions (one queue lock) and the exclusive create of
//     the next revision refuses a second writer (ErrRevisionExists).
//   - Damage is never read as content: a revision that does not decode
//     strictly, a gap in the run, an item whose id does not match its
//     directory or a payload whose digest does not match its text makes
//     the item Damaged (listed with the reason by Load); its text is never
//     invented or reused.
//   - Retention: Forget removes a finished item's directory (rename to a
//     dot name, then remove, then fsync the queue directory). The
//     controller keeps finished items 24 hours and at most 1024 (see
//     controller/doc.go), so the directory and the durable receipt index
//     it backs stay bounded.
//   - Delivery after a crash is settled from the session file only
//     (UserEntriesFrom): a dispatch records the file's size before the
//     engine write (Dispatch.SessionAt), and only a user message after
//     that position, with the item's text and not already matched to an
//     item dispatched earlier, proves it delivered; anything less is
//     delivery-unknown. Neither is permission to resend.
package queue
