// Package claude reads one Claude Code 2.1.328 transcript, read-only: the
// JSONL file $CLAUDE_CONFIG_DIR/projects/<slug>/<session>.jsonl that the
// binding names (DIGEST §8), and nothing else.
//
// Rules (seed 000 §8, L1-L6):
//   - Only the named file is opened (L3): its path is built from the
//     controller-owned config dir, the project directory's slug and the
//     session UUID; the session must be a UUID (so no separator, no ..),
//     and the project directory must be the binding's (L4). The directory
//     is never listed, so a decoy beside it is never read. The open uses
//     the session reader's safe-open rules (history.OpenRead): no symlink
//     in the last two components, a regular file, no swap (L4).
//   - No write, ever (L6): the file is opened O_RDONLY and nothing else is
//     created.
//   - Every conversation line must carry version 2.1.328; a line of
//     another version refuses unsupported-harness (L2): its tables (line
//     types, leaf rule) were derived from that version.
//   - Lines form a tree by parentUuid. The default leaf is the newest
//     childless main-chain entry in file order, the one --resume continues
//     (the resumed prompt's parentUuid is the old leaf, DIGEST §8); every
//     other childless entry is another branch's leaf, readable by leaf id
//     (L1). last-prompt's leafUuid agrees in the recordings and is kept
//     only as a hint. An entry's uuid is Claude Code's random UUID, or
//     for a prompt line the uuid its host sent, which the CLI writes
//     verbatim whatever it is (observed: an upper case UUID, "m1"); an id
//     or parentUuid over MaxEntryID bytes refuses unreadable, since every
//     record naming the leaf carries it.
//   - isSidechain entries (subagents) are kept apart: never part of a
//     main branch, listed by Sidechain (L5). Subagent files are never
//     opened.
//   - Bookkeeping lines (attachment, queue-operation, api-request*,
//     atis-latch, last-prompt, tools-used, cost-state, mode, ...) are not
//     rendered; attachments stay links of the parent chain.
//   - Entries whose cwd is outside the project refuse foreign-project.
//   - Prompt lines (type user with promptSource: what a host sent, not a
//     tool result or a marker the CLI wrote) are Entry.Prompt; PromptsFrom
//     lists the main-chain ones after a byte position, with their offsets,
//     so a restarted controller can prove a queued prompt delivered only
//     by a line written after its dispatch (a half-written last line
//     proves nothing).
//   - Each entry carries what it tells the model (Said, said.go), and the
//     reader counts the lines of no type the CLI was seen to write
//     (Unlisted), for the session watch below.
//
// # What the watch vouches for
//
// The controller's transcript watch (controller/claudecheck.go) vouches
// for a line, and so lets a stop record it for the wake and a recover to
// launch on, only once it is proven the CLI's: any process of the user,
// a tool the engine runs first of all, can append to the file, and
// everything below reaches the model on a --resume. Measured with the
// pinned CLI and the fake on loopback (2026-12-07): after a session,
// lines appended by hand and a --resume, the first request carried a
// forged assistant line, a forged non-prompt user line, a forged system
// line (local_command), attachments with a rendered reminder, a
// queued_command (as "The user sent a new message while you were
// working"), a critical_system_reminder, and a prompt_snapshot's
// systemPrompt (as the system prompt; the CLI even wrote it into its own
// next snapshot); a forged session_context, api-request-blob and summary
// line did not reach it. Per line type:
//
//	user, prompt   its uuid is one this execution sent (the CLI writes the
//	(promptSource) host's uuid, DIGEST §8) and it says the text sent.
//	assistant,     the CLI announced a frame under its uuid on stdout
//	user (tool     that says the same (role and content; every such line
//	result, the    of transcript_golden.jsonl has one, written 6 to 80 ms
//	interrupt      before the line). Not announced yet: the watch waits a
//	marker),       few polls for the frame, then calls it another
//	system         writer's; announced with other words: another writer's.
//	               A system line other than a compact_boundary was never
//	               recorded: it is refused unless a system frame of its
//	               uuid said the same, which no recording shows.
//	system         the CLI's auto-compaction (engine/claude/testdata/
//	compact_boundary compact, measured 2026-12-07: the fake reported a
//	               context near full): stdout announces a system frame
//	               compact_boundary under the line's uuid (then the
//	               summary frame) before writing the line, a new root
//	               (parentUuid null) whose logicalParentUuid is the last
//	               line before it and whose compactMetadata names the
//	               segment a resume relinks after the summary (the
//	               resumed request held the summary, then the preserved
//	               reply and prompt). It must say what its frame said
//	               (BoundarySaid: content "Conversation compacted",
//	               logical parent, preservedSegment, preservedMessages;
//	               the token counts, timings and runningTurnSends only
//	               the line carries are not compared).
//	user, the      announced as a user frame under its uuid, content one
//	compaction     text block; the line (isCompactSummary) writes the
//	summary        same text as a string, which says the same (MessageSaid).
//	               The attachments between the boundary and the summary,
//	               and after it, are the CLI's as any attachment: the
//	               summary and the next reply descend from them.
//	attachment     no frame announces it: it is the CLI's once an
//	               announced (or sent) line descends from it, since the
//	               CLI's lines name as parent only uuids it made and a
//	               second line under one of those is refused (repeats
//	               entry). One that a proven line follows without
//	               descending from it is another writer's; one at the end
//	               waits, unvouched: a stop records the bytes before it.
//	prompt_snapshot the CLI repeats its snapshot after a process's first
//	(at the end)   reply, with nothing after it until the next prompt: it
//	               is vouched for if it directly follows, and continues,
//	               a proven line, and says what the nearest snapshot above
//	               it says (SnapshotSaid: its system prompt and flags;
//	               the tools and cliPrefix only the repeat carries were
//	               measured not to reach the model).
//	user, task     the CLI writes it, under a uuid no frame carries, when
//	notification   a run_in_background task ends while it is idle
//	(promptSource  (engine/claude/testdata/background, measured
//	"system",      2026-12-07), after a system task_notification frame
//	origin kind    whose fields are the line's words (NotificationSaid);
//	task-          it then answers it in a turn nobody prompted, whose
//	notification)  reply is announced as any. The line must say what
//	               such a frame said, and no more lines of the file may
//	               say it than frames did: a writer's copy (same words,
//	               fresh uuid) is refused whichever came first. A task
//	               that ends mid-turn (testdata/background_midturn): the
//	               frame comes during the turn, the same line after it.
//	               A notification of another shape (another status than
//	               completed was not recorded) is refused unless its
//	               words are the frame's.
//	assistant "No  the CLI writes it, unannounced, as it sends the first
//	response       prompt after a turn cut by a stop: the CLI's once its
//	requested."    child, that prompt, is proven.
//	sidechain      must be announced like an assistant line (subagents
//	               were never recorded; their frames carry a uuid).
//	queue-operation, api-request, api-request-shape, api-request-blob,
//	atis-latch, last-prompt, tools-used, cost-state, mode
//	               allowed: bookkeeping the recordings show, which does
//	               not reach the model (last-prompt's leafUuid cannot
//	               move the resume off the pinned leaf: K8).
//	any other type, refused: a reader cannot say how the CLI loads it.
//	or a user, assistant, attachment or system line without a uuid
//
// A /compact prompt never reaches the CLI (engine/claude's text policy
// refuses a prompt that starts with a slash), so only the CLI's own
// auto-compaction writes these lines.
//
// Where the recordings are silent (other system lines, sidechains, other
// types) the choice is the one that refuses: a session that uses them
// closes admission (foreign-writer) rather than vouch for what the CLI
// may send the model. What is left: a line the CLI wrote under a uuid a
// writer copied before the CLI did is refused as a repeat, not told from
// the CLI's; and a restarted controller heard none of the frames read
// before it, so a line the CLI writes after a restart for one of them is
// refused too (fail closed).
package claude
