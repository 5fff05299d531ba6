// Package controller is the per-conversation controller process: it serves
// the conversation socket (JSON lines), admits clients as observers,
// fences control by generation, dispatches to the engine and records every
// decision in the journal.
//
// # Transport
//
//   - The peer's uid is read with SO_PEERCRED at accept; another uid is
//     refused (peer-uid) and the connection closed. The peer is held by a
//     pidfd and judged (activation.Judge) at accept and again before every
//     command but observe: an engine peer may observe, never act, and a
//     peer that cannot be read is one (engine-peer).
//   - Bounds (server.go, docs/protocol.md §1): at most MaxConns
//     connections (256, lowered to fit RLIMIT_NOFILE with 128 fds to
//     spare, two fds a connection), of which engine peers hold at most
//     seven eighths (too-many-connections, written before close, journaled
//     once per 10 s with a count); a hello within 10 s of accept and no 5 s
//     of silence before it (hello-timeout); 64 MiB of unfinished lines
//     across all connections (buffers-full); 256 MiB of unread control
//     records across all connections and 32 MiB on one (the slow client is
//     closed, and nothing is queued to it after the record that did not
//     fit). Bytes, not a count: each native UI line of the engine is a
//     record to every client, and a burst of them must wait for a client
//     that reads, never drop it (conn.go). State bounds: 64 confirmations (8 a connection), each until
//     it expires or its connection closes; 1024 receipts for at most an
//     hour (dedup.go); 64 stops and 16 eligibilities, the finished ones
//     (terminal stops, used or stale eligibilities) forgotten first
//     (bounded.go); revoked ids and confirmations of closed connections
//     are forgotten. A refusal quotes at most 64 bytes of client input.
//   - The first line must be a hello; anything else is refused
//     (hello-required) and the connection closed, so a client that speaks
//     another protocol learns at once. After the hello a bad line is refused
//     and the connection stays, since each line stands alone.
//   - Lines are capped (protocol.MaxLine by default); an over-long line is
//     refused (line-too-long) and the connection closed, since the stream
//     cannot be resynchronised without reading the rest of the line.
//   - Every write has a deadline, so a client that stops reading loses its
//     connection instead of stalling the controller.
//
// # Protocol behaviour
//
// docs/protocol.md is the reference.
//
//   - The binding follows the welcome on every connection, then every
//     change of it is broadcast.
//   - Commands are read in order; an interrupt or force stop is checked
//     and fenced in that order, then waits for the engine off the read
//     loop, so the same connection may confirm and force stop meanwhile
//     (H10). Each command is one entry of a table built once (commands.go)
//     and returns an outcome: its final record, or the rest to run off the
//     read loop.
//   - A shutdown (the context given to Server.Serve) reaches the engine
//     calls a command already sent: a prompt waiting for Pi's
//     acknowledgement ends delivery-unknown at once (instead of at the
//     command timeout, which held Serve's return until then), and an
//     interrupt's clear_queue or abort ends uncertain. A launch, a force
//     stop and the write of a held proof do not take it: they are claim
//     transactions that Serve or Close waits for, so the claim never
//     stays reserved or stopping.
//   - observe answers the newest history page of the default branch and a
//     cursor; observe with the cursor pages back through the same
//     snapshot (pages.go).
//   - After an observed record a connection gets exactly the events of
//     seam.execution from seam.replayStart on, in order, without gap or
//     duplicate, and none of the subscription that observe replaced: the
//     old feed (a cursor into the bus's ring) is ended first, and each
//     observe starts an epoch of the connection's stream whose observed
//     record the writer writes before it takes any event of that epoch
//     (conn.go). The writer drains a feed in batches, one writev each; a
//     feed loses its place only when it falls 8192 events or 32 MiB
//     behind, half the ring (bus.go), so a stalled client is detached
//     within that bound and slows no one, and the event it missed is
//     still in the ring for its resume.
//   - A restart that finds the engine's descriptors in the fd store
//     (resume.go; launch keeps them there, the engine's exit drops them)
//     re-attaches to the same execution when the claim is active for it
//     and a pidfd proves the recorded engine alive: same claim,
//     generation and execution; connections, control and receipts do
//     not survive, and clients are told (binding.restart, a restarted
//     notice). The engine's output is joined at the first LF after a
//     get_state probe, never in the middle of a line; the alternative,
//     trusting the first bytes because they parse, would take the tail
//     of a line whose head the dead controller consumed for a line of
//     its own. Anything else drops the descriptors and goes on below.
//   - A conversation with an idle policy (--idle-stop) hibernates once
//     idleLocked (and idleTools) held for the whole duration: stdin EOF,
//     then a stop of the cohort as a force stop does it, stopped with the
//     proof as the policy's (claims.Claim.Hibernate), and the controller
//     exits (Hibernated). The next controller wakes it on the same leaf
//     without a confirmation only from such a revision
//     (claims.Wakeable); any other stop still needs recover. The idle
//     decision is one predicate so that every condition (the queue's, the
//     approvals') is read under the same lock the hibernate re-checks it
//     under; separate timers per condition could each be right and still
//     hibernate a conversation one of them had just made busy.
//   - A controller that exits for good (Shutdown: its service stopped,
//     not restarted, whose fd store then lets go of the engine) ends the
//     engine first: a hibernate when idle but for its clients, else a
//     force stop without a confirmation, with its proof. Leaving it, the
//     engine ended at its stdin's EOF unproven and its scope lingered
//     with the anchor.
//   - A restart that finds the claim stopping finishes that force stop
//     (K10); one that finds an engine without a stop only reports it; one
//     that finds the claim uncertain and the engine's cgroup gone
//     finishes the stop on that removal.
//   - A stopped revision the claim store refuses (full, read-only) does
//     not undo the proof: it is held in memory and journaled
//     (CLAIM_WRITE=refused), the stop stays stopping, and the controller
//     writes it again with backoff, signalling nothing (record.go). A force
//     stop meanwhile writes it at once. Refusals of recover and force stop
//     name the way out of the state (wayout.go, docs/recovery.md).
//   - Admission as the binding shows it and as a prompt meets it is one
//     predicate (admissionLocked): the controller's own gate, the binding
//     state, and the engine connection's own fence and lost output. A lost
//     engine line (over the framing limit, or not JSON) turns the binding
//     uncertain at once (engineLost), so no client reads open while
//     prompts are refused. The alternative, closing the controller's gate
//     from the engine's side, leaves two fields that can drift again.
//   - The load check (K8) never asks Pi for the whole session: get_state,
//     then get_entries since the pinned leaf, which returns only what Pi
//     appended on start. Both wait pi.Budget: the command timeout plus
//     a second per 4 MiB of session file, since Pi answers only once it
//     has loaded the file. The foreign-writer check likewise asks only for
//     the entries after the last one it vouched for.
//   - The engine's stderr is a pipe the controller reads (stderr.go): the
//     last 20 lines (4 KiB) are kept for the binding's engineEnd, and lines
//     go on to the controller's stderr (the journal under systemd) with the
//     execution named, at most 16 KiB and 50 lines (journal entries) a
//     second; the rest is counted and reported as "N bytes of engine
//     stderr dropped, M lines" when the next window
//     begins or the pipe ends. A flood that then stops while the engine
//     lives reports its drop with the next line. When the engine exits
//     without a stop, or fails its load check, the binding carries
//     engineEnd (exit status, load check failure, stderr tail) and the
//     journal entry carries EXIT_STATUS and ENGINE_STDERR; an exit waits
//     at most 500 ms for the pipe to end, since a descendant may hold it.
//
// # Native decisions (approvals.go, approve.go)
//
// A native confirm or select the engine opens becomes an approval: the
// native decision id (opaque, engine-neutral), a projection id issued per
// controller generation, the exact title, message and choices, the
// deadline and a state. Choices where the contract is silent:
//
//   - Only the current controller answers, at its generation, under the
//     dispatch lock (so a takeover either committed first and the answer
//     refuses revoked, or waits for the write), through the current
//     projection (an older one refuses approval-superseded and names the
//     new one), with exactly one native choice (approval-choice; checked
//     where the response is built, pi.Conn.Answer).
//   - The same choice again under another request id answers the same
//     approval-resolved record and writes nothing (H6); another choice
//     refuses approval-conflict (H7). The record goes to every client.
//   - No cancel is offered. A confirm's cancel is false, already a
//     choice; a select's cancel reaches the extension as undefined, whose
//     meaning the extension alone decides (it could mean allow).
//   - The deadline is the native timeout less 250 ms from when the
//     request was read (Pi starts its timer first and drops a late answer
//     silently). At the deadline, or when an answer comes after it, the
//     approval becomes uncertain; it becomes resolved-natively, with
//     evidence and no chooser, when the run that raised it settles and the
//     engine no longer holds the dialog. An interrupt, a force stop or the
//     engine's exit makes every live approval uncertain, never denied; the
//     stop chains cancel the open dialogs (engine) and record them on the
//     stop (cancelledDialogs) and the approvals (cancelled).
//   - input and editor, a dialog whose text framing cut or that holds
//     more than 64 KiB of render data (a 1 KiB prefix is kept), and one
//     past the bound of 256 decisions an execution keeps (closed ones are
//     forgotten first) are disabled with a reason and never answered;
//     memory is at most 256 × 64 KiB of text an execution, and as many
//     decision ids (at most 128 bytes from Pi, 2049 from Claude: the
//     adapters refuse longer ids).
//   - A takeover re-projects every live decision (pending, disabled,
//     uncertain): the old projection is broadcast superseded, then the new
//     one; nothing is sent to the engine.
//   - observe answers the live projections (Observed.Approvals); the
//     binding counts the pending ones and shows engineState
//     waiting-for-approval while any is pending.
//   - nativeDialogOpenLocked tells dispatch of queued input whether the
//     engine holds a dialog open (pinned Pi runs a prompt beside one).
//   - The fire-and-forget methods become notices whose detail holds the
//     untrusted text; set_editor_text is shown, never put in a composer.
//
// # The prompt queue (docs/queue.md)
//
//   - A prompt is admitted into a durable per-conversation queue (package
//     queue, beside the claims) and never refused busy: its first
//     revision is on disk before the reply says queued (prompt.go).
//   - One scheduler goroutine (dispatch.go) sends the head when a
//     run-settled event went through the pump, an item was admitted, an
//     item changed or the queue was resumed. It rechecks, under the queue
//     lock and the dispatch lock, what a prompt's dispatch always
//     rechecked (admission, control, generation, execution, text policy),
//     plus the engine being idle with every agent_settled pumped, no
//     pause and no native dialog open (nativeDialogOpenLocked; a
//     dialog's close kicks the scheduler). The dispatched revision is
//     durable before the engine write, and records the session file's
//     size then: a restart proves delivery only from user messages after
//     it (queueload.go). A failed or dispatch-refused head pauses the
//     queue; an engine-gone one stays queued and pauses it; Pi's busy
//     answer holds dispatch until that execution's next agent_settled.
//   - Locks: the queue lock (promptQueue.mu) is taken before the
//     dispatch lock, which is taken before mu. Queue items change only
//     with the queue lock and mu both held, so either suffices to read
//     them; the durable write of a transition holds the queue lock only.
//     A dispatch releases the queue lock once its dispatched revision is
//     committed and holds only the dispatch lock across the engine's
//     reply, so admission, edits, cancels and a force stop's drafts never
//     wait for a hung engine; it takes the queue lock again for the
//     outcome only after releasing the dispatch lock.
//   - Choices where the issue is silent: a pause holds the items waiting
//     when it began and ends when none is left (the prompt typed after an
//     interrupt runs); a takeover by the items' own actor keeps the queue
//     going under the new generation, another actor's items pause it; a
//     control or execution change noticed at dispatch pauses instead of
//     refusing the item (it stays the sender's to resume, edit or
//     cancel); a stop inferred at restart keeps queued items queued (only
//     a force stop makes drafts); the queue starts paused after a restart
//     with items waiting. Bounds: 64 waiting items and 1 MiB of their
//     text; finished items kept 24 hours and at most 1024 (the durable
//     receipt index), except drafts, kept until cancelled (at most 256);
//     at most 16 edits per item; a queue record carries the waiting
//     items' text, every draft, failed and dispatch-refused item (their
//     text up to 2 MiB, newest first) and the newest 32 other finished
//     items.
//   - Order on one connection is not revision order: a scheduler kick
//     waiting on the queue lock may dispatch an item, and send its
//     dispatched receipt revision to the admitting connection, before
//     that connection's queued reply is written; and a command's reply
//     carries the queue as it was at its commit, after broadcasts of
//     later changes. Receipts and queue records carry revisions: a
//     client keeps the highest (client/state.go never replaces a queue
//     with an older revision).
package controller
