// Package engine is the engine seam and what every engine adapter shares.
// engine/pi drives the Pi coding agent, engine/claude Claude Code; the
// controller drives both through the same two interfaces.
//
//   - seam.go: Engine (pin, seal and Spec, session identity, History, Open)
//     and Driver (events, Prompt, Interrupt with its TurnProof, Turn,
//     Decisions/Decide/Changed, Close), NativeDecision and Decide's errors
//     (ErrDialogClosed, ErrAnswerShape), History.
//   - records.go: Dispatch, TurnProof, Effect, QueuedText: the evidence
//     an adapter hands the controller, in one vocabulary.
//   - options.go: Options (execution id, line bounds, command timeouts,
//     re-attach), ErrClosed, ErrTimeout, NativeError (an engine's own
//     refusal, kept verbatim). busy.go matches Pi's busy wording as
//     ErrNativeBusy: Pi's, but NativeError.Is must live with its type.
//   - stdin.go: Stdin, the one writer of an engine's stdin: whole
//     records, each making progress within Options.StdinTimeout; a write
//     that misses it or is cut short breaks it for good (nothing is
//     written after a partial record), and the adapter says so with an unavailable
//     stdin-broken event. Alternatives weighed: no deadline, Close alone
//     ending a stuck write (the state before: the prompt's client and
//     every command behind it waited until a force stop); a deadline
//     that leaves the stdin usable (a later record glued onto the
//     partial line is read as one garbled line, or as a record nobody
//     sent).
//   - framing.go, reduce.go: the LF-only line reader and the streaming
//     reduction of oversize lines; output.go: the event pump (Output,
//     ReadLines, CloseWaiters).
//   - policy.go: the prompt text policy (CheckText), engine-neutral: the
//     controller applies it before any engine sees a prompt.
//   - spec.go: Spec, what the controller spawns; block.go: NativeBlock,
//     the content block shape both adapters and the history reader convert.
//
// # Which package a file belongs to
//
// A file stays here only when a second engine uses it as it is, or when
// the controller must speak of it without knowing the engine kind;
// everything that names a Pi command, event, flag, file or version lives
// in engine/pi (RPC commands, event mapping, dialogs, tracker, interrupt,
// pin of the package tree and of Node, seal, re-attach). Alternatives
// weighed: keeping Pi as package engine itself with the seam beside it
// (the state before this split: Pi's names, State, Answer, dialogs, leaked
// into the interface the controller drove, and every other engine had to
// pretend to be Pi); shared parts under engine/internal (the controller
// and the history reader use the records and NativeBlock, which internal
// would hide from them); a third package for the shared parts
// (engine/wire), leaving engine for the interfaces only (two imports for
// every adapter and the controller for no gain in isolation: the records
// and the framing are what the interfaces speak). Tests of the framing
// against Pi's recordings live in engine/pi with the recordings
// (engine/pi/testdata); the reduction fuzzer here seeds from them.
//
// The controller builds one Engine per conversation from its settings,
// by kind, and launches (Spec, which checks the pin), opens and
// re-attaches (Open, Options.Resume) and reads a Claude transcript
// (History) through it. Engine-specific capabilities it needs of only one
// engine are not in Driver (Pi's get_state and get_entries load and
// re-attach checks and its re-sync; Claude Code's initialize, its re-sync
// and the uuids of the prompts it sent): the controller asks for them
// with a type assertion on the Driver, so no engine carries methods it
// must refuse. docs/engines.md lists what the controller still reads
// beside the seam.
//
// Every Driver counts its run-settled events in TurnSummary.Settles
// before it queues each on Events: the controller's queue dispatches only
// once its pump published as many.
//
// # Framing
//
// A line up to Options.MaxLine (default 1 MiB) is read whole. A
// longer one, up to Options.LineLimit (default 256 MiB, the history
// reader's file limit: Pi writes nothing on one line that its session file
// could not hold), is reduced while it streams in (reduce.go): one pass
// copies the JSON value keeping its structure, cuts each string to
// MaxLiveString bytes of its JSON form on a whole escape and a whole UTF-8
// sequence, cuts strings to 1 KiB (ids and types stay whole) and leaves
// array elements out once the copy reaches 2 MiB, and gives up past 3
// MiB. Memory is the in-memory bound
// plus the reduced copy, whatever the line's length; the Clip names what
// was cut, and the mapper marks exactly the events and blocks that lost
// something (Event.Truncated, Block.Truncated). A response that lost array
// elements is refused by its command (pi.ErrAnswerTooLarge) rather than read
// as whole; cut strings are fine for commands, which read ids and types.
// Alternatives weighed: raising the in-memory bound
// to 256 MiB (four 18 MiB copies in flight, and a client line cap of 16
// MiB exceeded by the event), and splitting message_end into parts (the
// contract's multipart finals) while streaming, which needs the message's
// role and stop reason before its content, not guaranteed by key order.
// A line over the limit is reported as soon as the limit is passed, as an
// unavailable event with reason line-too-long, and the binding is marked
// uncertain; the rest of the line is skipped up to its LF. So is a line
// that does not reduce (not one JSON value: undecodable-line). A final
// line without LF at EOF is still decoded (Pi's own reader does the
// same). Undecodable lines are unavailable events too and also make the
// binding uncertain: pinned Pi sends only JSON on stdout, so anything else
// means something was lost.
package engine
