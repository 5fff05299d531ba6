// Package web is the web surface: every conversation live in a browser,
// served by `mosaicctl web serve` on mosaic-web.socket (docs/web.md).
//
// The server is one more client of the conversation sockets. Each browser
// tab that opens a conversation gets its own protocol connection
// (client.Dial), an observer until the page asks for control; every page
// command is the protocol command of the same name, addressed with the
// generation and execution the page showed, so a view made stale by a
// takeover elsewhere is refused by the controller, never acted on. There is
// no path into a controller that a terminal client lacks.
//
// What the page shows is rendered here: the client library's Transcript
// joins the history page and the live events by the seam rules, and
// terminal.Transcript turns them into the lines `mosaicctl attach` shows,
// every engine string already made inert (control, bidi and invisible
// characters as notation). The page receives those lines by item (only
// the items that changed, found by comparing items as the terminal's line
// cache returns them, so a streamed delta costs the change, not the
// conversation) over server-sent events and inserts them with
// textContent; no engine string becomes a class name (a role gives its
// first word, and only a plain word). Alternatives weighed:
//
//   - Forwarding protocol records and rendering in the page would put a
//     second implementation of the seam, deduplication and sanitizing
//     rules in JavaScript, where it could drift from the terminal's.
//   - Rendering Markdown (goldmark with HTML off, then bluemonday) would
//     add an HTML producer and a sanitizer in the path of every engine
//     string for headings and emphasis; escaped text shows exactly what
//     the terminal shows and cannot become markup.
//   - WebSocket instead of SSE: commands are plain POSTs with a CSRF
//     header either way, and SSE reconnects by itself (Last-Event-ID
//     names the tab) and passes proxies untouched.
//
// Authentication: `mosaicctl web` writes a one-time login token into the
// Store (the hash only), under $XDG_RUNTIME_DIR/mosaic/web, which a
// confined engine cannot see; the server redeems it for an HttpOnly,
// SameSite=Strict session cookie. Every request checks Host (DNS
// rebinding), every request with a session Sec-Fetch-Site (a page on
// another loopback port is same-site, so SameSite does not stop its
// fetches; web-fetch-site), every state change Origin and the session's
// CSRF token (guard.go), and a revoked session's streams end within a
// heartbeat.
//
// Before any of that, every request's connection is judged (peer.go,
// activation.Judge.JudgeConn): an engine can read the browser's cookie
// from the profile on disk and send it with any Host and Origin, so a
// request from inside an engine scope, or from a process that cannot be
// vouched for, is refused web-peer — reads too, since the list page holds
// the CSRF token and a stream the transcript. Streams are judged again at
// each heartbeat. Judging only state changes was weighed: it would leave
// every transcript and the token that authorizes the state changes to the
// agent. At most maxJudging judgements run at once (web-busy past
// judgeWait), and none is cached (peer.go says why).
//
// Native decisions (approval records) are held per tab (approvals.go) and
// sent to the page whole whenever they change, each string made inert as
// the terminal's dialog shows it. The page answers by the index of a
// choice and the server sends the exact label it holds for that
// projection, with the page's generation: the engine's bytes never round-
// trip through the browser, and a stale view or an observer is refused by
// the controller. Sending the raw labels for the page to post back was
// weighed: JSON carries them intact, but the page would then hold engine
// bytes that no longer pass the one sanitizer, and a script bug could
// alter what is answered.
//
// The prompt queue (queue.go) is held per tab the same way: the newest
// queue record by revision (an older one, such as an observe's snapshot
// read before a change, never replaces it), sent to the page whole when
// the revision grows, each item's text made inert. The page's chips edit
// and cancel by item and the revision they showed (compare-and-set at the
// controller) and resume the queue, with the page's generation. Unlike an
// approval's labels, a queued text is the person's own; the page gets it
// exactly (only when it differs from the inert text) for the inline edit
// and for putting a draft back in the composer, and assigns it only to a
// textarea's value, which is never markup.
//
// A tab whose stream breaks keeps its connection for TabGrace, so a page
// that reconnects keeps control and its place. After it the connection is
// closed and the tab parked for ParkFor: a page that comes back gets a
// new connection that observes from the last seq its transcript holds,
// and the controller's replay ring fills in what it missed (the
// transcript drops repeats); when the ring no longer reaches that far the
// transcript starts over from a fresh page and the page is told
// (recordReconcile). Keeping the place in the page instead (its last seq,
// sent back on reconnect) was weighed: the page holds rendered lines, not
// events, so the server would still have to rebuild the transcript from a
// fresh page, and the replay would have nothing to join. The server exits after
// Options.Idle with no browser attached and socket activation starts it
// again.
package web
