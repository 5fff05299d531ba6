// Package claude drives one sealed headless Claude Code CLI (pinned
// @anthropic-ai/claude-code 2.1.328, its linux-x64 native binary) over
// stream-json on the stdin and stdout pipes the controller hands it. It
// fills the engine seam (engine.Engine with Engine, engine.Driver with
// Conn); docs/engines.md puts it next to Pi. Every table here comes from
// the probe of that exact binary (reference/claude-code-2.1.328/DIGEST.md).
//
// The exported surface: Resolve/Check (the pin), Seal/CheckArgs (argv),
// Environ/CheckEnv/LoadEnvFile (environment), Command (the Spec), New (the
// Conn: Initialize, Prompt, Interrupt, Decisions, Decide, Turn, Events),
// NewEngine (the seam value), NewSession.
//
// # Choices where the issue is silent
//
// Pin. The version is read by running `--version` once, at Resolve, with
// the sealed environment (traffic switches on, a throwaway config dir, no
// credentials): the binary is never started without them. Check does not
// run it again; it re-hashes the whole file before every spawn (same
// bytes, same version). A binary with the pinned version and another hash
// (another platform's build) is pinned by its own hash; the digest's hash
// is checked by contrib/claude/install.sh and by the real-binary test.
// Alternative weighed: refusing every hash but the digest's, which would
// tie mosaic to linux-x64 without saying so at conv add.
//
// Argv. `-p` is kept although the SDK does not pass it: the recordings
// were made with it. --replay-user-messages is not passed: the prompt's
// own lifecycle frames already correlate it, and a replay is one more
// frame type to trust.
//
// Environment. HOME is the user's (tools need it; the CLI wrote nothing
// to HOME outside CLAUDE_CONFIG_DIR in the probe). CLAUDE_CODE_TMPDIR and
// TMPDIR point at a controller-owned directory so nothing lands in a
// shared /tmp; XDG_RUNTIME_DIR too, for the CLI's cc-socks socket (left
// stale after SIGKILL). CLAUDE_CODE_SDK_READS_SESSION_STATE is not set:
// the tracker needs none of its frames. Env-file values are verbatim: no
// quotes, no expansion, so what the file says is what the engine gets.
//
// Prompts. The CLI queues a prompt sent during a turn, coalesces two
// queued ones and folds one sent during a tool into the running turn
// (DIGEST §7). So Prompt refuses busy while a turn runs or a prompt holds
// the slot, and the controller's queue stays the only queue. The uuid is
// fresh per prompt; the transcript's user line carries it.
//
// Events. The CLI emits one `assistant` frame per content block, all
// sharing message.id; they are gathered and the message ends at the
// stream's message_stop, so a client sees one message-end per message as
// with Pi. A tool_use block becomes tool-start when its assistant frame
// arrives: from there the CLI may run it (auto-allowed commands ask
// nobody), so a stop in between counts it as an uncertain effect: saying
// more than was observed is not allowed, saying less is.
//
// Interrupt. cancel_queued is always set: the controller never queues
// natively, so anything queued is either the slot's item (then proven
// unconsumed by `cancelled`) or external. When a turn was running, the
// proof waits for that turn's result (AbortTimeout) and records its
// terminal_reason; no result leaves the proof uncertain and the fence up.
//
// Approvals. A permission request is answered once. Its decision id is
// request id/tool use id#n, n counting the decisions this Conn kept
// (after Options.IDPrefix): unique for the Conn's life, so a request the
// CLI withdrew, that was forgotten, and that it asks again under the same
// ids with another input is a new decision, and an allow of the approval
// shown for the first answers nothing. A request re-sent in an
// initialize answer while still kept keeps its id. Allow sends the
// model's own input back as updatedInput (the CLI runs updatedInput, so
// anything else would run something nobody saw) and never
// updatedPermissions; deny sends a fixed message. A request whose line
// framing had to cut offers deny only, for the same reason.
// permission_suggestions (add a rule, a directory, a mode) are never
// projected. An execution keeps at most 256 requests (maxDecisions)
// holding at most engine.MaxDecisionBytes, the settled ones forgotten
// first, as Pi's adapter bounds its open dialogs: a CLI that asks and
// withdraws in a loop would otherwise grow the list, and the scan of it
// every request makes, without bound, and 256 requests of the largest a
// line carries held 3 GiB. Past a bound with the pending requests alone,
// or with a request id or tool use id over 1024 bytes (maxNativeID: the
// controller keeps the decision id of every approval it holds), a
// request is answered with an error like an unsupported one: never
// allowed, never kept. The error names why (the bound, the id's length,
// the decision id another request has). A request id over 1024 bytes is
// not answered at all, the turn marked uncertain: the whole id would be
// held until written, and a cut one could name another request. Error
// answers are written by one writer goroutine per Conn from a queue of
// at most 256 (the id and the text alone, under 1 MiB), never by the
// reader: a CLI that stops reading its stdin blocks that one writer, and
// an answer past the queue is dropped, the turn marked uncertain, as
// output lost is; before, each refusal parked a goroutine holding its
// answer, and 2,000 refused requests with 64 KiB ids held 142 MiB. A request the CLI re-sends in an
// initialize answer (pending_permission_requests, at launch or after a
// re-attach) is taken as a live one: refused by the same bounds, it is
// answered with the same error, since the CLI waits on it as on a live
// one. Every request id is answered at most once: the ids answered
// (decided or refused, the latest 4096, as digests) are remembered past
// the decision's forgetting, so one the CLI lists again before it read
// the answer, or asks again, is neither answered again nor kept again
// (a live repeat is shown duplicate-id).
//
// Re-attach. A restarted controller joins a running CLI's stdout
// (Options.Resume) with Resync: an initialize probe makes even an idle
// CLI write a LF, everything up to the first LF is skipped (the tail of a
// line the dead reader began is never parsed), and a second initialize's
// answer, taken in wire order, says whether a turn runs (session_state
// running or requires_action) and re-sends the pending permission
// requests (pending_permission_requests, the whole original frames: the
// only shape the CLI was seen to give after a reconnect, DIGEST §3). Any
// other session_state is an error, never taken for idle. Control ids
// carry Options.IDPrefix and events count from Options.SeqBase, as Pi's
// re-attach does. SentPrompt lets the transcript watch tell this
// execution's prompt lines from another writer's.
//
// Announcements. Every assistant and non-prompt user frame, and every
// system frame, with a uuid is kept as what it tells the model (its role
// and content, hclaude.Said) under that uuid, and so is each prompt
// Prompt sends: Announced gives the transcript watch what the CLI said
// it wrote, so a line a tool appends is never vouched for
// (announced.go; history/claude's package doc has the rules per line
// type). At most 4096 are kept (maxAnnounced), none of a frame framing
// cut, and a uuid announced twice with other words stands for no line.
package claude
