// Package inert owns the one table of characters that engine text may
// not carry verbatim into what the operator reads: the attach terminal,
// the web page (both through terminal.SanitizeLine) and a journal entry's
// MESSAGE (audit). The engine is the adversary: whatever it writes (its
// text, a tool's output, its stderr) may try to start a terminal escape,
// break a line to forge one of the controller's, reorder what is shown
// (bidi controls) or hide text (invisible and tag characters).
//
// Only which characters, and why, is decided here. Each reader shows
// them in its own notation (terminal: ^[ and <U+202E>; audit: \n and
// \u{202E}), so a row added here is escaped by every reader at once.
//
// Lookups are on the terminal's hot path, once per rune of every line it
// shows: ASCII is one array index, anything else a scan of a dozen
// sorted rows, neither allocates.
package inert
