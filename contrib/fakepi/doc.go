// Package fakepi is a fake of the pinned Pi coding agent 0.85.1 in
// `--mode rpc`, for tests that need a Pi they can script and hold at an
// exact step. The program is contrib/fakepi/cmd/fakepi; this package holds
// its code (Main), the test-side pause-point client (Control), and the
// conformance tests that run the same raw-JSON exchanges against the fake
// and the real binary (MOSAIC_PI=$(contrib/pi/install.sh); required when
// CI=true). Where the two differ, the real binary wins.
//
// # Command line
//
// Exactly the sealed argv the controller may give the real Pi:
//
//	fakepi --mode rpc --no-extensions --no-prompt-templates --no-themes \
//	  --no-skills --no-context-files --session <abs> \
//	  [--provider X] [--model Y] [--thinking Z]
//
// Anything else exits 2 with a message on stderr. Without --provider and
// --model the model is Pi's "unknown" placeholder and every prompt is
// refused with "No API key found for the selected model." (as the real Pi
// does with no credentials). With them, get_state's model object is read
// from $PI_CODING_AGENT_DIR/models.json when it names that model (as
// stubmodel.WriteAgentDir writes it), so it equals the real Pi's.
//
// # Protocol, as the recordings show it
//
//   - Framing: records split on LF only (U+2028/U+2029 never split), a
//     trailing CR dropped, a last unterminated line handled at EOF. Output
//     is one JSON object per line, keys in Pi's order.
//   - Responses: {id?, type:"response", command, success, data?|error?};
//     the id is echoed as given. A line that is not JSON gets
//     {type:"response", command:"parse", success:false, error:"Failed to
//     parse command: ..."} with V8's wording for the common cases; an
//     unknown type gets "Unknown command: X" ("undefined" without a type);
//     a JSON null line crashes with exit 1, as it crashes Pi.
//   - Commands run in stdin order. prompt preflight and its response happen
//     on the reader; the run goes on in the background, so the response
//     precedes agent_start. abort responds only once the session is idle
//     (after agent_settled). Modelled: prompt (images ignored), steer,
//     follow_up, abort, clear_queue, get_state, get_messages, get_entries
//     {since?}, get_tree, get_commands (Pi's inline /llama command),
//     get_last_assistant_text, set_thinking_level, set_auto_retry,
//     abort_retry, extension_ui_response. Other known Pi commands answer
//     success:false "fakepi does not model the X command".
//   - prompt while streaming: without streamingBehavior, refused with
//     "Agent is already processing. Specify streamingBehavior ('steer' or
//     'followUp') to queue the message."; with it, queued: queue_update,
//     then the success response. Slash text is passed to the model
//     literally (no extension command, skill or template is modelled).
//   - clear_queue writes queue_update (empty) before its response, whose
//     data is {steering, followUp} as they were.
//   - Events per run: agent_start, turn_start, user message_start/end,
//     then per model call assistant message_start (stopReason "pending"),
//     message_update (text_start, text_delta per chunk, toolcall_start,
//     toolcall_delta "" and four argument pieces, then text_end and
//     toolcall_end at the end of the stream), message_end; for a tool call
//     tool_execution_start, tool_execution_update {content:[]}, one update
//     per output read with the accumulated text, tool_execution_end,
//     toolResult message_start/end; turn_end; further turns for tool calls,
//     then steering (one at a time, after turn_start, with the queue_update
//     that removes it), then follow-ups; agent_end {messages, willRetry};
//     agent_settled.
//   - The bash tool really runs `bash -c` in the fake's working directory,
//     in its own process group; the tool ends when the shell exits (a
//     `setsid` background child keeps running and does not hold it).
//     Output text, "(no output)", "\n\nCommand exited with code N" and
//     "Command aborted" follow Pi's bash tool.
//   - abort: a stream ends with text_end and an assistant message
//     stopReason "aborted", errorMessage "Request was aborted"; a tool is
//     killed (its process group) with "Command aborted"; a model call
//     begun after the abort yields stopReason "error", "This operation was
//     aborted". Queued messages still run, as in Pi: the steer inside the
//     aborted run, a follow-up in a new agent_start run, one agent_settled
//     at the end; then the abort response.
//   - Retries: a scripted retryable error gives agent_end willRetry:true,
//     auto_retry_start {attempt, maxAttempts:3, delayMs:2000·2^(n-1),
//     errorMessage}, a short real wait (FAKEPI_RETRY_DELAY_MS, default
//     20), then a new agent_start run; one agent_settled after all of
//     them; auto_retry_end {success:true} after the next good message_end.
//   - Dialogs: extension_ui_request {id, method, title, options|message|
//     placeholder|prefill, timeout?}; the run waits for the matching
//     extension_ui_response, the abort, or the timeout. A dialog with
//     "repeat": n is asked n times in a row, each with a fresh id after
//     the previous one ended, as an extension calling ctx.ui.confirm in a
//     loop does; Pi writes nothing when a timeout resolves one.
//     A turn's "notify" lines go out first, back to back, as
//     extension_ui_request {id, method:"notify", message, notifyType:"info"}
//     (ctx.ui.notify in a loop); nothing answers them.
//   - Session file (--session): Pi's lazy write. Entries live in memory
//     until the first assistant message exists; then the header and all
//     pending entries are written at once with O_EXCL, later entries
//     appended. A message's entry is written before its message_end line.
//     An existing file is resumed with the leaf at its last line; an empty
//     one gets a header at once.
//   - Startup append (sdk.js): a session with messages gains a
//     thinking_level_change if its branch has none; a session without
//     messages gains model_change (when a model is set) and
//     thinking_level_change at every start.
//   - stdin EOF: exit 0 at once, even mid-run.
//   - FAKEPI_STDIN_STALL=<text>: a prompt whose message is exactly text is
//     handled as any other (response, run), then the fake never reads its
//     stdin again, as an engine whose event loop hangs: the controller's
//     next writes fill the stdin socket's buffer and block. The process
//     lives on (at most 10 minutes).
//
// # Script (FAKEPI_SCRIPT)
//
// A JSON file in the stubmodel.Script shape, so one script drives the fake
// and the real Pi through contrib/stubmodel:
//
//	{"turns": [
//	  {"text": ["Hello! ", "I will "], "tool": {"command": "setsid sleep 300 & echo started"}},
//	  {"text": ["Done."], "chunkDelayMs": 20},
//	  {"endless": true},
//	  {"error": "503 overloaded", "retryable": true},
//	  {"dialog": {"method": "confirm", "title": "Allow?", "message": "rm -rf x"}, "text": ["ok"]},
//	  {"text": ["queued"], "followUp": "extension follow-up"}
//	]}
//
// One turn per model call, in order across prompts; past the end the
// answer is "Plain answer to: <last user text>" in four chunks. "tool" ends
// the answer in a bash call (id "call_<n>" unless given); "endless" streams
// "w0 ", "w1 ", ... until aborted; "error" ends the call with stopReason
// "error" ("retryable" makes Pi's auto-retry take it); "dialog" opens an
// extension dialog before the call; "followUp" is queued in Pi's native
// follow-up queue, as an extension would, right after this turn's
// turn_end (with its queue_update).
//
// # Flood (FAKEPI_FLOOD)
//
// FAKEPI_FLOOD=<n> replaces every answer with n text deltas written back
// to back, unpaced, each the time of its write in decimal Unix
// nanoseconds and a space (the controller's fan-out benchmark reads the
// delay to each observer from them). See EnvFlood.
//
// # Pause points (FAKEPI_CONTROL)
//
// FAKEPI_CONTROL=<unix socket path> makes the fake listen there. A test
// connects with DialControl, Arms a point (acknowledged before Arm
// returns, so arm first, then write the stdin line), Waits for the report
// {"paused":<point>,"detail":{...}}, acts, and Releases. Each Arm holds one
// pass. The points are the Point* constants (see Points): prompt-received,
// before-response, before-agent-start, after-user-message,
// before-model-call, after-message-end, tool-running, after-tool-end,
// after-turn-end, before-agent-end, retry-wait, before-agent-settled,
// dialog-open, clear-queue-received, abort-received, before-abort-response,
// stdin-eof. prompt-received, before-response, clear-queue-received,
// abort-received and stdin-eof hold the stdin reader; the others hold only
// the run. Wire format, one JSON object per line: requests {"op":
// "arm"|"disarm"|"release", "point", "id"}, answered {"ack": id,
// "error"?}.
//
// # Evidence
//
//   - FAKEPI_STDIN_LOG=<path>: every byte read from stdin is appended,
//     exactly as read.
//   - FAKEPI_SESSION_LOG=<path>: every byte the fake writes to the session
//     file is appended too, so a test can check that the session file is
//     exactly the engine's own writes (the controller never writes it).
package fakepi
