// Package client is the Go client of a conversation socket: what
// `mosaicctl attach`, the one-shot verbs and the tests use to talk to a
// `mosaicctl serve` controller. The wire protocol it speaks is written down
// in docs/protocol.md; this package is one implementation of it, not its
// definition.
//
// A Client is one connection. It starts as an observer (the server says so
// in its welcome) and never takes control by itself: Takeover and
// AcquireRecoveryControl are explicit, and a reconnect is an observer again.
//
// Every command method sends one request with a fresh request id, fills the
// generation and execution from the latest binding or control record the
// connection has seen, and waits for the one reply that carries that id. A
// refusal comes back as a *protocol.Refusal error (protocol.CodeOf reads its
// code). A reply that never arrives — the connection broke, or ctx ended
// first — is an *OutcomeError holding the exact command, which Resend can
// ask about again (retry:true) on this or a new connection without the
// server dispatching it twice. A line the server refused unread
// (line-too-long, buffers-full: a refusal naming no request, then the
// close) is that request's answer when it must be: the write failed part
// way (the client half-closes and reads on), or the request was the only
// one waiting. A partial line is never dispatched.
//
// Everything the server sends after its welcome, replies included, is also
// delivered in order on Updates: events, binding, control, stop and notice
// broadcasts, observed pages and receipts. A Transcript consumes that
// stream and keeps the history page and the live events joined by the seam
// rules (deduplication by (execution, seq), reconcile markers at gaps, new
// executions and conflicting repeats); it says when it needs an observe, and
// Client.Reobserve performs it.
//
// The controller sends the binding right after its welcome (a controller
// that the connect itself started sends it once its engine is up): a
// one-shot client calls WaitBound after Dial and can address commands
// without observing. An Observed reply carries the newest history page and, when
// there are older parts, a Cursor; OlderPage pages back with it (the
// records arrive on Updates as well, and a Transcript ignores them).
//
// A typical loop:
//
//	c, err := client.Dial(ctx, path, client.Options{Name: "attach", Runs: true})
//	...
//	t := client.NewTranscript()
//	if _, err := c.Observe(ctx); err != nil { ... }
//	for u := range c.Updates() {
//		if w := t.Update(u); w.Observe {
//			go c.Reobserve(ctx, w) // the reply arrives on Updates too
//		}
//		render(t.Snapshot())
//	}
//
// With Runs, a reader that falls behind gets the deltas of a block that
// waited for it as one event (protocol.Event.Texts): fewer lines to read
// and decode, the same deltas. A Transcript takes such events as their
// deltas; a reader of its own iterates protocol.Event.Deltas.
package client
