// Package history reads a Pi 0.85.1 session file (format v3) read-only and
// serves it as CHAT-01 history pages: what an observer sees before the live
// events of the conversation (issue 5 "Observe", seed 003 "Parser",
// "Pages", "Snapshots, epochs, cursors", "Follow").
//
// The API is small:
//
//   - Read takes a Snapshot: the file up to its last LF, its SHA-256 and
//     (dev, ino), parsed into the entry tree. A missing file is a new
//     conversation (New), not an error.
//   - Follow takes a later Snapshot that must continue an earlier one
//     (same file, same prefix bytes, compared byte for byte), parsing and
//     hashing only appended lines;
//     Appended and Foreign give the entry ids it added, for the foreign
//     writer check (W10).
//   - Snapshot.Page gives a branch's page from a part index; Page.Cursor
//     and Snapshot.Next continue it, on the same snapshot or, as a follow,
//     on a later one (only what was appended to that branch).
//   - SessionID and LeafID are what the controller pins at launch and
//     checks against get_state/get_tree (K8).
//   - Snapshot.Seam is the engine seam's History (engine.History) of a
//     snapshot: each branch's messages, root first, by leaf; pi.Engine's
//     History returns it.
//
// Refusals are *protocol.Refusal: unsafe-path, unreadable, too-large,
// foreign-project (only with Options.Project), not-a-pi-session, incomplete-header (reconcile), source-replaced
// (reconcile), unknown-branch (reconcile), cursor-unknown (a part index
// past the branch's end, reconcile).
//
// Nothing here writes: no create, no rename, no repair of a missing final
// LF (Pi's own loader appends one; the reader never does).
//
// # Opening
//
// The parent directory is opened O_DIRECTORY|O_NOFOLLOW and the file is
// opened relative to it with openat(O_RDONLY|O_NOFOLLOW|O_CLOEXEC|
// O_NONBLOCK|O_NOCTTY), so neither the sessions directory nor the file can
// be a symlink, and a file swapped between the fstatat and the open is
// detected by (dev, ino). Components above the sessions directory are the
// conversation config's business (it validated the path). A missing
// sessions directory is a new conversation, like a missing file. A file
// that vanishes between the fstatat and the open is unsafe-path (a swap),
// not a new conversation.
//
// # Choices where the seeds are silent
//
// Header. Line 1 must be a complete JSON object with type "session",
// version exactly 3 and a non-empty string id; anything else is
// not-a-pi-session (Pi would migrate an older version by rewriting the
// file). A first line without LF is incomplete-header with reconcile when
// it is empty or starts with "{" (Pi writes the header and first entries
// in one go, so this is a file being created), else not-a-pi-session.
// With Options.Project set, the header cwd must be absolute and the
// project or inside it (real paths; a cwd that no longer exists compared
// as written), else foreign-project.
//
// Lines. Blank lines are skipped, as Pi does. A valid entry is a JSON
// object with a string type and a non-empty string id, parentId null,
// absent or a string; anything else is a malformed-line notice at its
// position. A second "session" line is an unexpected-header notice (Pi
// skips it). A file may hold at most 1024 such lines (maxUnreadable):
// Pi writes none but a line torn by a crash, each is a notice the
// snapshot keeps, and one more is not-a-pi-session. It may hold at most
// 1,048,576 entries (maxEntries), one more is too-large. A message of
// more than 4096 content blocks (maxBlocks) is a malformed-entry notice,
// never decoded. A valid entry whose type-specific fields do not decode keeps
// its place in the tree and shows a malformed-entry notice. Pi's leaf is
// the last parsed line even without an id; ours is the last valid entry.
// A trailing line without LF is left out (Incomplete) even when it parses:
// Pi's loader would take it as the leaf and append the missing LF, so
// until Pi does, the controller's K8 check against such a file differs.
//
// Branches. Names are assigned in one pass in file order: the first root
// (null or missing parent) is main; a later root, or a child that is not
// its parent's earliest child, starts b.<id>; the earliest child continues
// its parent's branch only when the parent's line precedes it (so loops
// and duplicate-id moves cannot make naming recurse, and names never
// depend on later lines). Each name ends at one tip, the last entry of its
// chain; a branch's history is the path from the root to that tip. The
// default branch is the one holding Pi's default leaf, and since that leaf
// is the last entry in the file it is always its branch's tip: the default
// page ends exactly where Pi's context does. A duplicate id that moves an
// entry to a later line detaches its earlier children, which then start
// their own branches. An entry set that only loops back on itself forms
// branches whose pages start with a loop notice.
//
// Notices. Entry keys are n.<id>, notices x.<line> (unreadable lines),
// x.missing.<id>, x.loop.<id> and x.forked (parentSession, first on every
// branch). A notice at a line goes before the first path entry with a
// later line, so every branch shows it in the same place and earlier parts
// stay unchanged while the file grows. Unknown roles (bashExecution
// included) and unknown entry types are notices. A message with role
// custom (a v2 hookMessage) shows like custom_message, only with display.
// Compaction and branch_summary show as markers carrying their summary as
// one text block; retainedTail is not rendered.
//
// Content. Blocks are decoded as engine.NativeBlock and converted by its
// Block, the code engine uses for live message-end content (image bytes
// dropped, unknown types and redacted thinking unavailable with empty
// text, thinkingSignature never read). Tool call ids stay native so
// history and live tool events match; only entry ids are hashed. Short
// strings (ids, names, roles, mime types, timestamps) over 1024 bytes are
// replaced by h-<sha1>, never clipped.
//
// Caps. Strings are counted in UTF-16 units (what a JavaScript client
// counts) and cut at 262144 units or 1 MiB of JSON, on rune boundaries; a
// toolCall whose argument JSON does not fit one fragment carries it as
// text fragments (as toolcall-delta does live). Fragments group into parts
// of at most 64 blocks and about 4 MiB; a page holds at most 100 parts and
// 8 MiB of JSON with 64 KiB kept free for the record around it, measured
// by encoding each part.
//
// Parse once, page from an index. A Read scans each line lightly: it
// checks the line is JSON that encoding/json accepts and takes only the
// top-level type, id and parentId; any line it does not judge (escapes or
// non-ASCII bytes in a key or in those values, repeated keys, other value
// types, deep nesting, syntax errors) is parsed in full, so the light scan
// is never different from the full parse, only faster. An entry keeps its
// line and decodes it when a page first shows it, and a branch is cut
// into parts only as far as pages asked for. The newest page, which an
// observe sends first, needs the branch's part count, and parts are
// numbered branch-wide: the light scan also learns, of a line too short
// for any cut but the block count to bind, whether it makes no part or
// exactly one (its message's role and number of blocks; hint.go), so
// counting decodes only the entries it could not judge and the parts a
// page shows. Decoding every entry to count them cost a 10 MB session
// four times its read (FuzzLight holds each promise to the decode; a
// broken one refuses unreadable, never shifts a page). The snapshot
// therefore keeps the file's bytes (at most MaxSize). SHA-256 runs on its
// own goroutine from the first MiB read on, and a read of more than 1 MiB
// is scanned in pieces of about 256 KiB that every CPU takes in turn, the
// hashing goroutine once its hash is done. A Follow reads the prefix and compares it byte for byte with
// the kept bytes (so a rewrite or truncation anywhere in it is source-replaced),
// continues the digest from the saved SHA-256 state over the appended
// bytes only, and adds the appended entries to the follow chain's index in
// place; an earlier snapshot of the chain still sees only its own entries
// (an entry is its own when its line is within the snapshot). A follow
// builds the index afresh when an appended id repeats one of the file or
// is the missing parent of an earlier entry (either would change earlier
// branch names), or when the snapshot followed is not the chain's latest.
//
// Follow and cursors. A cursor is a plain value: branch, parts read, a
// digest of those parts' identities (entry key, part, line) and the
// snapshot's (epoch, size, digest). A snapshot accepts cursors of itself
// and of the last 1024 snapshots of its follow chain; older ones refuse
// source-replaced, which only costs the client a re-read. A cursor from an
// empty new conversation fits any later snapshot.
package history
