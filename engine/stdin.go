package engine

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mosaic-agents/mosaic/protocol"
)

// DefaultStdinTimeout bounds how long a record's write to the engine's
// stdin may go without progress (Options.StdinTimeout). Both engines read
// their stdin on an event loop that runs between everything else they
// do, mid-turn included, so a stdin that a healthy engine leaves unread
// for this long means an engine that stopped reading: it is three command
// timeouts, because a write past it is never retried and ends the binding
// (uncertain, force stop), while a command past its own timeout costs
// only that command. It bounds progress, not the whole record: a large
// prompt that an engine busy for a while reads slowly is not cut short.
const DefaultStdinTimeout = 30 * time.Second

// stdinChunk is how much of a record one write offers the engine, the
// deadline renewed before each: a few times less than the socket's
// buffer, so an engine that reads at all renews it.
const stdinChunk = 64 << 10

// ErrStdinBroken is in the chain of every error of a write to an engine
// stdin that failed, and of every write refused after one: nothing more
// is written to that engine.
var ErrStdinBroken = errors.New("engine stdin is broken")

// StdinError is the write that broke an engine's stdin: it timed out
// (the engine stopped reading and its buffer is full) or failed, after
// Written of the record's Len bytes reached the engine.
type StdinError struct {
	Written, Len int
	// Timeout is the deadline the write missed; zero when it failed
	// otherwise.
	Timeout time.Duration
	// Closed says Close cut the write short: the controller's doing (a
	// force stop, a shutdown), not the engine's.
	Closed bool
	Err    error
}

func (e *StdinError) Error() string {
	what := fmt.Sprintf("write to the engine's stdin failed (%v)", e.Err)
	switch {
	case e.Closed:
		what = "the controller closed the engine's stdin during the write"
	case e.Timeout > 0:
		what = fmt.Sprintf("the engine did not read its stdin for %s", e.Timeout)
	}
	if e.Written == 0 {
		return what + "; nothing of the record was written"
	}
	return fmt.Sprintf("%s; %d of the record's %d bytes were written", what, e.Written, e.Len)
}

// Unwrap gives both the sentinel and the cause to errors.Is and As.
func (e *StdinError) Unwrap() []error { return []error{ErrStdinBroken, e.Err} }

// wayOut is what a client can do about a broken stdin: nothing can reach
// the engine (an interrupt is a write too), so only a force stop, which
// signals the cohort, ends it; recover then starts anew.
const wayOut = "nothing more is written to this engine: force stop, then recover"

// Stdin is the one writer of an engine's stdin: whole records, one at a
// time, each making progress within a deadline. A write that misses its
// deadline or fails breaks it for good: a record cut short left a
// partial line in the engine's input, and any later record would be read
// glued onto it (one garbled line, or worse, a line that decodes as
// something nobody sent), so nothing is ever written after it, and every
// later write is refused at once.
//
// The deadline needs a pollable writer (SetWriteDeadline): the
// controller's end of the stdin socket pair is non-blocking
// (scopes/stdio.go), also when a restarted controller takes it back from
// the fd store. A writer without deadlines (a test's io.Pipe) is written
// unbounded.
type Stdin struct {
	w       io.WriteCloser
	timeout time.Duration
	onBreak func(error)
	mu      sync.Mutex // held across one record's write
	broken  atomic.Pointer[StdinError]
	closed  atomic.Bool
}

// NewStdin writes to w, each record making progress within timeout
// (DefaultStdinTimeout if zero). onBreak is called once, without any lock
// of Stdin held, when a write breaks it, unless Close came first (a write
// Close cut short is the controller's own doing, not the engine's).
func NewStdin(w io.WriteCloser, timeout time.Duration, onBreak func(error)) *Stdin {
	if timeout <= 0 {
		timeout = DefaultStdinTimeout
	}
	return &Stdin{w: w, timeout: timeout, onBreak: onBreak}
}

type writeDeadliner interface {
	SetWriteDeadline(time.Time) error
}

// Write writes rec, one whole record, or breaks the stdin. Its error is a
// *protocol.Refusal: engine-gone when no byte of rec reached the engine
// (refused once broken, or the write failed before any), so the caller
// may treat the record as never sent; delivery-unknown when part of it
// did. Either wraps ErrStdinBroken.
func (s *Stdin) Write(rec []byte) error {
	s.mu.Lock()
	if b := s.broken.Load(); b != nil {
		s.mu.Unlock()
		return refusal(protocol.CodeEngineGone, &refused{b})
	}
	d, _ := s.w.(writeDeadliner)
	var timeout time.Duration
	if d != nil && d.SetWriteDeadline(time.Time{}) == nil {
		timeout = s.timeout
	}
	n, err := 0, error(nil)
	for n < len(rec) && err == nil {
		if timeout > 0 {
			err = d.SetWriteDeadline(time.Now().Add(timeout))
		}
		var m int
		if err == nil {
			m, err = s.w.Write(rec[n:min(n+stdinChunk, len(rec))])
		}
		if err == nil && m == 0 {
			err = io.ErrShortWrite
		}
		n += m
	}
	if err == nil {
		if timeout > 0 {
			_ = d.SetWriteDeadline(time.Time{})
		}
		s.mu.Unlock()
		return nil
	}
	b := &StdinError{Written: n, Len: len(rec), Err: err}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		b.Timeout = timeout
	}
	b.Closed = s.closed.Load()
	s.broken.Store(b)
	s.mu.Unlock()
	if s.onBreak != nil && !b.Closed {
		s.onBreak(b)
	}
	if n == 0 {
		return refusal(protocol.CodeEngineGone, b)
	}
	return refusal(protocol.CodeDeliveryUnknown, b)
}

// refusal says why and what to do, in that order (protocol.Wrap would
// put the cause last).
func refusal(code string, cause error) *protocol.Refusal {
	return &protocol.Refusal{Code: code, Message: cause.Error() + "; " + wayOut, Err: cause}
}

// refused is a write refused because an earlier one broke the stdin.
type refused struct{ cause *StdinError }

func (r *refused) Error() string {
	return "nothing was written: the engine's stdin broke earlier: " + r.cause.Error()
}

func (r *refused) Unwrap() error { return r.cause }

// Unwritten reports whether err, from Write, says no byte of the record
// reached the engine: the caller may hold it as never sent (a prompt
// stays queued), which a record cut short may not.
func Unwritten(err error) bool {
	var r *refused
	if errors.As(err, &r) {
		return true
	}
	var b *StdinError
	return errors.As(err, &b) && b.Written == 0
}

// Broken returns the write that broke the stdin, nil while it is whole.
func (s *Stdin) Broken() error {
	if b := s.broken.Load(); b != nil {
		return b
	}
	return nil
}

// Close closes the engine's stdin without waiting for a write in
// progress (mu): closing the pollable writer is what wakes a write the
// engine does not read, which then fails.
func (s *Stdin) Close() error {
	s.closed.Store(true)
	return s.w.Close()
}
