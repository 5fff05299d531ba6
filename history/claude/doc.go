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
package claude
