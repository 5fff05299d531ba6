// Package pi is the Pi adapter behind the engine seam (package engine:
// Engine, Driver, History). engine/claude is the other adapter.
//
// The Pi adapter drives one sealed headless Pi coding agent (pinned
// @earendil-works/pi-coding-agent 0.85.1, `pi --mode rpc`) over the stdin
// and stdout pipes the controller hands it.
//
// The exported surface is small:
//
//   - NewEngine is the seam value (engine.Engine) for one conversation's
//     Config; its Open returns the Conn as an engine.Driver.
//   - New wraps the pipes in a Conn: LF-only framing (LineReader, which
//     reduces oversize lines), id correlated commands with timeouts
//     (Prompt, ClearQueue, Abort, GetState, GetTree, GetEntries,
//     GetCommands; the *Within forms take a timeout from Budget, which
//     grows with the bytes Pi must load or send), native events mapped in
//     wire order onto protocol.Event records (Events), the turn tracker
//     (State, and Turn in the seam's terms) and the R3-1 interrupt
//     (Interrupt, which returns a TurnProof).
//   - The slash policy (engine.CheckText, engine.Prefixes) is shared; the
//     facts it rests on are Pi's (Slash policy below).
//   - Seal/CheckArgs are the argv seal; Resolve/Check are the pin; Command
//     builds the Spec (program, argv, environment, directory) the
//     controller spawns inside its systemd scope.
//
// # Choices where the issue is silent
//
// Framing is package engine's (LineReader, reduction); what it means for
// Pi: Pi writes large messages whole on one line four times (text_end,
// message_end, turn_end, agent_end), so an 18 MiB answer costs four
// reductions of about 40 ms each. An undecodable line or one over the
// limit is an unavailable event and makes the binding uncertain: pinned
// Pi sends only JSON on stdout, so anything else means something was
// lost. A final line without LF at EOF is still decoded (Pi's own reader
// does the same).
// Prompt refuses text that is not valid UTF-8 (malformed) rather than let
// encoding/json replace bytes. The writer relies on encoding/json, which
// escapes control characters and always escapes U+2028/U+2029, so a
// prompt can never break its record (S7).
//
// Events. Known native events that carry no renderable content
// (agent_start/end, turn_start/end, queue_update, retries, compaction,
// entry_appended, ...) feed the tracker and produce no record; the table
// is nativeEvents. Known events the adapter does not render (dialogs,
// extension errors, bash output) become unavailable with reason
// unsupported-native-event; unknown types become unknown-native-event.
// Unavailable events name the native type (cut to 64 bytes) and carry no
// payload. In message content, redacted reasoning is an unavailable block
// with empty text (its signature is never read), as in history, so a live
// message and its re-read copy agree. Tool-call argument streaming (toolcall_start/delta/end) has its
// own kind, toolcall-delta, appended per fragment and replaced by
// message-end. text_start/thinking_start produce nothing; *_end produce an
// empty delta with lastFragment set. message-end is one part (part 0,
// lastPart); a transport that splits large messages renumbers parts.
// Message keys are m1, m2, ... per execution. Tool events carry the key
// of the assistant message that called the tool. A response whose id no
// command waits for (Pi's parse errors have none) becomes an unavailable
// event with reason uncorrelated-response. A command given up on (timeout,
// cancel, a failed write) forgets its waiter; its answer, should it come,
// is taken quietly while its id is among the latest 256 given up on.
//
// Tracker. A run is visible from agent_start to agent_settled (retries
// included: one settle may follow several agent_end). While it is, or
// while a prompt holds the slot, Prompt refuses busy without writing.
// The slot's item is "started" when a user message_start carries exactly
// its text (the seal leaves no other input path); other user messages are
// counted as external. The slot is released at agent_settled once the
// item was acknowledged or started, and on a native refusal.
//
// Interrupt. The Conn fences itself (prompts refuse fenced) for the whole
// interrupt. When clear_queue fails or times out, abort is not sent,
// because abort would run the queue whose contents are unknown; the proof
// is uncertain and the fence stays, leaving force stop as the way out.
// A near match is the item's text trimmed, case-folded or contained in
// (or containing) a returned text. An uncertain proof keeps the slot held
// (delivery-unknown) and the fence up; a certain one releases both.
//
// Dialogs (dialogs.go). extension_ui_request becomes a native-ui event
// whose UI field (never on the wire) carries the request verbatim: a
// dialog (confirm, select, input, editor) or a fire-and-forget update.
// The Conn keeps every open dialog with its exact native choices ("true"
// and "false" for a confirm, the labels for a select), at most 256; a
// request past that, or one without a usable id (1-128 bytes) or with an
// unknown method, is an unavailable event and never answerable. Answer
// writes one extension_ui_response only for an open confirm or select
// and only with one of its choices (a confirm's as a real boolean, a
// select's label byte for byte), closing the dialog first, so one id is
// never answered twice; pinned Pi validates nothing, so this is the only
// check between a client and the extension. Input and editor are never
// answered. A request whose line framing cut is marked Cut. At most 256
// dialogs are held open (maxOpenDialogs), holding at most
// engine.MaxDecisionBytes of strings as decoded; a request past either
// is an unavailable event (unsupported-native-event), never answerable:
// a count alone let an engine hold 256 dialogs of up to 6 MiB. Interrupt
// writes abort, then at once cancels every open dialog
// ({"cancelled":true}) before waiting for the abort's answer: pinned Pi's
// abort waits for a dialog whose extension took no signal (DIGEST §1.4),
// and after the abort an answer no longer runs a gated tool; the proof
// lists them (CancelledDialogs). Cancel does the same for a force stop.
// Forget closes a dialog whose native timeout passed without writing.
// Through the seam (driver.go) the open dialogs are the Driver's
// Decisions: Kind is the form, Choices the exact native choices (none for
// input and editor), Decide is Answer, Changed fires on every open and
// close. Pi says nothing of a dialog once it is resolved, so a resolved
// one leaves the list rather than show a state the adapter did not see.
// Alternative weighed: keeping resolved dialogs with their answers as
// Claude does (its cancel is a native frame; Pi's timeout is silent, so
// the state would be the adapter's guess).
//
// Extensions (extensions.go). A conversation may pin reviewed extension
// files: PinExtension resolves the real path and hashes a regular file
// (at most 4 MiB); Command re-hashes each before every spawn (opened
// O_NOFOLLOW, so a symlink swapped in refuses) and passes -e PATH;
// CheckArgs admits -e only with a clean absolute path, so no npm: or git:
// spec. Under --no-extensions pinned Pi then loads those files and its
// built-in hidden llama.cpp extension; settings.json extensions and
// packages and auto-discovered ones are not loaded, and PI_OFFLINE=1
// keeps it from installing anything; besides, the controller gives the
// engine an agent directory of its own (controller/agentdir.go), so the
// user's settings.json is never read. Alternative weighed: a directory
// per extension (its manifest can add skills under --no-skills).
//
// Slash policy. Pinned Pi tests only index 0 of the raw message, so " /x"
// is not interpreted by Pi itself; the policy still refuses a slash after
// any Unicode white space or invisible format character (Cf, U+FEFF),
// because the contract says "first non-whitespace character". "!" and "@"
// are not interpreted on the RPC prompt path; a slash on a later line is
// not interpreted (LaterLineSlashInterpreted).
//
// Seal and pin. --flag=value forms are refused; the --session path must
// be absolute and clean. Resolve refuses any package or version other
// than the pinned one, since every table here was derived from that
// version. The pin (pin.go, tree.go, node.go) covers what can run:
//   - the entry file's SHA-256 (also the claim's BinarySHA256);
//   - PackageDigest, over every file of the package tree and of every
//     package it loads by name (dependencies, optional and peer
//     dependencies, transitively, each resolved as Node resolves a bare
//     specifier from the importing package's real path): path, type and
//     permissions, size, content hash or symlink target. Packages merely
//     installed alongside (an npm prefix's other packages) are not
//     covered: Pi does not load them by name, and pinning them would make
//     an unrelated `npm install -g` break every conversation. NODE_PATH
//     is dropped from the environment, so it is not searched;
//   - the interpreter: the "# pi-node:" of a contrib/pi/install.sh
//     wrapper, else the entry's "#!" program ("/usr/bin/env node" looked
//     up in the PATH where conv add runs: the user's, not the user
//     manager's), else ResolveOptions.Node; its real path, `node
//     --version` (checked against the package's engines.node) and
//     SHA-256. A "#!" naming something other than node (the test fakes'
//     /bin/sh) is pinned by path and hash without a version.
//
// Spec.Path is always the pinned interpreter, with the entry as its first
// argument, so the PATH the engine is spawned with never picks the node.
// Check re-verifies everything before each spawn, cheaply: the tree is
// walked and every file lstat'ed; when the digest of those stat
// fingerprints (size, mtime, ctime, inode) equals the one cached with the
// manifest under $XDG_STATE_HOME/mosaic/pins, nothing is read; otherwise
// only changed files are re-hashed (all of them without a cache). The
// cache holds no more authority than the conversation file beside it.
// Node's last-resort global folders ($HOME/.node_modules,
// $HOME/.node_libraries, PREFIX/lib/node) are searched like Node does,
// so an optional dependency planted there later changes the digest.
// The environment passes PATH, HOME, USER, LOGNAME, LANG, LC_ALL, LC_CTYPE,
// TZ, TMPDIR and XDG_*; TERM is not passed (there is no terminal); any
// inherited PI_* is dropped; PI_OFFLINE=1, PI_SKIP_VERSION_CHECK=1 and
// PI_TELEMETRY=0 are forced, and PI_CODING_AGENT_DIR is set from Config.
//
// # Findings against pinned Pi source
//
// AgentSession.isStreaming is _isAgentRunActive (agent-session.js:616),
// which _runAgentPrompt holds across retries until agent_settled
// (agent-session.js:772-785). So on 0.85.1 a prompt without
// streamingBehavior sent during a retry window is refused with the busy
// text, not queued; the N1 case (a Mosaic prompt found in clear_queue) is
// reproduced by the scripted peer, and on the real binary the same step
// ends as N6. R3-1 matching still guards it, and still classifies
// external queue texts (N3).
package pi
