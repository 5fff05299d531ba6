package controller

import (
	"sync"
	"sync/atomic"

	"github.com/mosaic-agents/mosaic/claims"
	hclaude "github.com/mosaic-agents/mosaic/history/claude"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/scopes"
)

// execution is one engine incarnation: its scope handle, its RPC
// connection and what it was launched with.
type execution struct {
	id         string
	handle     *scopes.Handle
	conn       engineConn // nil for an orphan found at restart, or an engine not opened (unopened)
	engineName string
	pins       claims.Pins
	exited     bool // the engine process is gone (not a stop by itself)
	// stderr keeps the tail of the engine's stderr (nil for an orphan);
	// end is what the binding reports once the engine exited without a
	// stop or failed its load check. Both guarded by Controller.mu.
	stderr *stderrTail
	end    *protocol.EngineEnd
	// approvals are the native decisions its engine raised (approvals.go);
	// guarded by Controller.mu.
	approvals approvalSet
	// settled counts the run-settled events the pump has published, so
	// the queue dispatches only once the bus holds the last turn's end.
	// Guarded by Controller.mu.
	settled int
	// kept is true while the engine's descriptors are in the fd store
	// (resume.go); guarded by Controller.mu.
	kept bool
	// forgot are the decisions closed without an answer (engineconn.go).
	forgot forgotten
	// checked is the size of the session file (Pi's, or Claude's
	// transcript) up to which the session watcher vouched for every entry
	// and followed the leaf; the idle policy hibernates only when the file
	// is no larger (idleSession), so the stop records the leaf it ends on.
	checked atomic.Int64
	// vouched is what the session file held at the session watcher's last
	// check (nil until its first): the stopped revision records it
	// (claims.Record.Vouched), so the wake and a recover can tell a file
	// another writer changed while no engine ran from the one this
	// execution left.
	vouched atomic.Pointer[claims.FileState]
	// transcript is a Claude transcript as the watch last vouched for it
	// (vouchTranscript): what the stop's last check follows.
	transcript struct {
		sync.Mutex
		t *hclaude.Transcript
	}
	// heldBack is the Claude watch's last read that held lines back (one
	// not proven yet) and the first of them, nil once a read is vouched
	// for whole: a restart hands over the bytes before that line
	// (Handover), more than vouched holds.
	heldBack atomic.Pointer[heldBack]
	// mark is where a Claude execution's vouched bytes and announcements
	// are kept for a crash (mark.go), nil without one.
	mark atomic.Pointer[markWriter]
}

// heldBack is a transcript read and the first line of it not proven the
// CLI's (transcriptVerdict.pendingLine; 0: none known).
type heldBack struct {
	t    *hclaude.Transcript
	line int
}

// engineState is the binding's engineState for an execution: orphan when
// no engine connection is held (an engine found at restart, or one whose
// pipes its driver did not take), exited, or else fenced, busy or idle as
// the turn tracker reads. Without an execution bindingLocked reports none.
func (x *execution) engineState() string {
	switch {
	case x.conn == nil:
		return "orphan"
	case x.exited:
		return "exited"
	}
	ts := x.conn.Turn()
	switch {
	case ts.Fenced:
		return "fenced"
	case ts.Running || ts.Slot != nil:
		return "busy"
	default:
		return protocol.EngineIdle
	}
}
