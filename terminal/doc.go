// Package terminal is the pure core of the mediated terminal
// (`mosaicctl attach`): what it shows and what it sends, with no I/O beyond
// byte slices and strings. The screen loop (raw mode, reads, drawing) and
// the socket wiring sit on top of it.
//
//   - Sanitizer (sanitize.go): SanitizeLine, SanitizeBody and Escape show
//     every character of inert.Table (internal/inert, the one table of
//     what engine text may not carry verbatim) in the terminal's notation;
//     Width measures the result.
//   - Input (input.go): Parser turns raw terminal bytes, split anywhere,
//     into Keys; Flush ends a lone ESC after the caller's timeout.
//   - Composer (composer.go): the local buffer; Handle/Edit/Submit,
//     SetControl (clears on any control change), Settle (outcomes).
//   - Status (status.go): the one-line status; Dialog (dialog.go): a
//     confirmation whose every row stays one line.
//   - Transcript: the view model (model.go: Apply(protocol.Event),
//     AddHistory, Mark, Reset) and its rendering (render.go:
//     Lines(width)). AddPage (history.go) adds a history page, its parts
//     and fragments joined; FromView, Compose and Follow (follow.go) build
//     it from a client.View, with the Older history read back above its
//     page (older.go), the same way for the terminal and any other
//     renderer of the library. The client library's Transcript is the one
//     model of order, deduplication and seams; this one shows its view.
//   - Screen (screen.go): the whole attach screen without I/O: Handle(Key)
//     returns the Action for the loop, Render(width, height) the Frame
//     (viewport, status line, composer or dialog) to write; history
//     prepended above the viewport does not move it.
//
// # Choices
//
// Sanitizing. Every character of inert.Table is shown in notation: C0
// controls and DEL in caret form (^[ for ESC, ^? for DEL, ^I for TAB, ^M
// for CR), everything else as <U+XXXX> (C1, U+2028/2029, bidi controls,
// invisible characters, tag characters); invalid UTF-8 bytes as <0xFF>,
// one per byte. ZWJ and ZWNJ pass (emoji sequences, joining scripts), as
// do variation selectors and combining marks. LF is the only character the
// renderer lays out: in a message body (and a tool result, a thinking
// block, the composer) it is a line break; in a header, the status line,
// a notice, a reconcile marker or a dialog it is shown as ^J, so each
// stays one line. TAB is shown as ^I, not expanded: the issue asks for C0
// to be made visible and the renderer does not guess tab stops. The
// notation itself is plain ASCII, so text that already contains "^[" or
// "<U+202E>" looks the same as the escaped character; that is accepted
// (it is inert either way). Width is an approximation (combining and
// format characters 0, East Asian wide and common emoji 2); terminals
// disagree on emoji sequences, so the screen loop must still clip.
//
// Input. CR is Enter; LF (Ctrl-J), ESC CR and ESC LF (Alt-Enter) are a
// newline; Ctrl-T, Ctrl-G, Ctrl-O, Ctrl-X (force stop), Ctrl-R (recover),
// Ctrl-C/Ctrl-D, DEL/^H, ESC [5~ / [6~ and the CSI and SS3 arrows are
// keys; TAB is text; any other control byte, Alt-key or escape sequence is
// KeyUnknown and the composer ignores it. Invalid UTF-8 typed outside a paste becomes U+FFFD. The keys do not
// depend on where reads split the input (adjacent text may be split
// differently; tests compare after joining it): an incomplete escape
// sequence or UTF-8 character is held, and a lone trailing ESC waits for
// the next chunk; Flush, called by the screen loop when nothing follows
// within its escape timeout, turns what is held into KeyEscape,
// KeyUnknown or U+FFFD. A CSI longer than 32 bytes ends as KeyUnknown.
//
// Bracketed paste. ESC [200~ … ESC [201~ is one paste: every byte in it,
// newlines, CR, ESC, other control bytes and a nested start marker
// included, is KeyPaste text, never a key, and a paste never submits. A
// marker split across reads, right after its ESC or anywhere else, is
// still a marker. Flush does nothing inside a paste: a paste ends only at
// its end marker (the caller can see InPaste). Pasted bytes are kept
// literally (a terminal that pastes newlines as CR gives CR), as S7 asks.
// A stray end marker outside a paste is KeyUnknown.
//
// Composer. Empty at start; Enter takes the composer at that key (text
// after it in the same chunk starts the next message); cleared after each
// submit. SetControl clears it whenever the Control the client holds
// (controller connection and generation) differs from the last one, and
// the first time control becomes known; a notice says it was cleared.
// Submit as an observer returns ErrNotController ("not admitted: you are
// an observer; Ctrl-T takes control") and keeps the text; on an empty
// buffer it returns ErrEmpty. Text is inserted literally; only invalid
// UTF-8 becomes U+FFFD on insert, so what the composer shows is what is
// sent (encoding/json would make the same substitution). Settle records
// the outcome; a lost one shows OutcomeUnknown and nothing can be resent,
// because the composer keeps no copy of submitted text. Editing is
// append and backspace only (no cursor movement yet).
//
// Transcript. Order, deduplication and seams belong to the client
// library's Transcript: it joins the history page and the live stream by
// (execution, seq), drops identical repeats and holds what follows a gap,
// a conflicting repeat or a new execution behind a marker; this package
// renders its View and keeps no second copy of those rules. FromView shows
// the page, the view's seam marker (a page read while a run was visible),
// the events, and its tail marker with the count of events held. Every
// marker starts a new segment: message keys and tool call ids are looked
// up only within the current segment, so content after a marker is never
// joined to content before it (a delta for a message whose start is
// behind a marker makes a new message, "start not seen", and a block whose
// first fragment is not 0 starts with "…"). Inside the stream, a fragment
// out of order, a delta after message-end and a second message-start for
// a key also mark a reconcile. Deltas append to their block (the kind
// decides text, thinking or tool-call arguments); message-end replaces the
// message's provisional blocks with its parts in part order (a missing
// part is shown as missing; until the last part the header shows "…");
// tool-update and tool-end replace the tool's result; a tool's progress
// item shows from tool-start until a toolResult message for its call id is
// present (from the stream or the page), with at most MaxToolLines lines
// of output. run-settled and unavailable are notices; an unknown kind is
// shown as unavailable. Tool arguments are shown as their JSON says: the
// controller writes every record without HTML escaping (protocol.Line), so
// "2>&1" arrives as written and nothing is unescaped here. Follow folds in
// only the events a view appended since the last one; Lines keeps each
// item's rendered lines by width and a version every change bumps, so a
// frame re-wraps only what changed (a long conversation is not re-wrapped
// per streamed delta).
//
// Screen. Layout from the top: the transcript viewport (following the
// end; PageUp/PageDown move by the viewport less one line and keep the
// reading position while new lines arrive), the status line, a notice line
// of its own (a long refusal is never cut behind the status fields), then
// the composer (its last lines, at most a third of the height) or the open
// dialog. While a dialog is open every key goes to it: y/Y confirms;
// n/N, Enter, Esc and Ctrl-C/Ctrl-D decline; anything else, a paste
// included, is ignored. Every row is clipped to the width once more, since
// Width is an estimate.
package terminal
