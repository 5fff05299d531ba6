package engine

import (
	"errors"
	"fmt"
	"time"
)

// Default command timeouts. Abort waits for Pi to go idle (it answers
// after agent_settled), so it gets longer.
const (
	DefaultCommandTimeout = 10 * time.Second
	DefaultAbortTimeout   = 60 * time.Second
)

// ErrClosed is returned for commands after the engine's output ended or
// the Conn was closed.
var ErrClosed = errors.New("engine connection closed")

// ErrTimeout is wrapped when the engine did not answer a command in time.
var ErrTimeout = errors.New("engine did not answer in time")

// NativeError is Pi's own refusal of a command, kept verbatim as evidence.
type NativeError struct {
	Command string
	ID      string
	Text    string
}

func (e *NativeError) Error() string {
	return fmt.Sprintf("engine refused %s %s: %s", e.Command, e.ID, e.Text)
}

// Options configure an adapter's connection (Engine.Open).
type Options struct {
	// Execution is the execution incarnation id stamped on every event.
	// Required: events from two incarnations must never be confused.
	Execution string
	// MaxLine bounds the engine output line held whole (DefaultMaxLine
	// if zero).
	MaxLine int
	// LineLimit bounds the longest line read at all (DefaultLineLimit if
	// zero); a line between MaxLine and LineLimit is reduced as it
	// streams in: strings cut, Event.Truncated set. A LineLimit not above
	// MaxLine turns reduction off.
	LineLimit int64
	// MaxQueued bounds the bytes of mapped events held for a reader that
	// is behind (DefaultMaxQueued if zero); past it events are dropped
	// and one unavailable output-lost event says so (Output).
	MaxQueued int64
	// CommandTimeout bounds each command but abort.
	CommandTimeout time.Duration
	// AbortTimeout bounds abort.
	AbortTimeout time.Duration
	// StdinTimeout bounds how long a record's write to the engine's stdin
	// may go without progress (DefaultStdinTimeout if zero). A write past
	// it breaks the stdin
	// for good (Stdin): every later command is refused engine-gone and an
	// unavailable event with reason stdin-broken says so.
	StdinTimeout time.Duration
	// Resume joins the output of an engine that runs already (a controller
	// re-attached after a restart, resume.go): nothing before the first LF
	// is parsed, events are numbered from SeqBase+1, and command ids carry
	// IDPrefix so that no response meant for an earlier reader of the same
	// pipe can be taken for one of ours. Call Resync before anything else.
	Resume   bool
	SeqBase  uint64
	IDPrefix string
}
