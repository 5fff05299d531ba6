package engine

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/mosaic-agents/mosaic/protocol"
)

// DefaultMaxQueued bounds the bytes of mapped events an Output holds for
// a reader that is behind (Options.MaxQueued).
const DefaultMaxQueued = 64 << 20

// eventOverhead is what an event costs beyond its strings: the struct,
// its pointers, the queue slot.
const eventOverhead = 256

// Output is the read side both engine adapters share: the mapped events,
// handed to the reader in order through a queue (so a slow reader never
// stalls the goroutine that reads the engine, and with it the responses
// commands wait for), and when and why the engine's output ended. An
// adapter's Conn embeds it.
//
// The queue is bounded by bytes, not events: the engine writes at its
// will, and a few thousand large lines behind a slow reader would
// otherwise hold gigabytes. Past the bound, events are dropped until the
// reader took the queue down to half of it; then one unavailable
// output-lost event stands where they were, with how many (Dropped), so
// the reader knows the stream has a hole and its size. Output numbers the
// events it delivers itself, so the hole leaves no gap in Seq.
type Output struct {
	mu       sync.Mutex
	q        []queued
	bytes    int64 // eventBytes of the events queued and not yet delivered
	max      int64
	seq      uint64 // Seq of the last event queued
	dropping bool   // past the bound: events are dropped until the queue drains to half
	dropped  uint64
	hole     uint64 // events dropped since dropping began
	holeExec string // the Execution of the events the hole is in
	ended    bool
	err      error
	wake     chan struct{}
	out      chan protocol.Event
	done     chan struct{}
	finish   sync.Once
}

// queued is an event with the bytes Push counted for it, given back as
// it is delivered.
type queued struct {
	e protocol.Event
	n int64
}

// NewOutput starts the delivery goroutine; it ends after End once every
// queued event was delivered. Events are numbered from seqBase+1;
// maxQueued bounds the bytes held (DefaultMaxQueued if zero).
func NewOutput(seqBase uint64, maxQueued int64) *Output {
	if maxQueued <= 0 {
		maxQueued = DefaultMaxQueued
	}
	o := &Output{seq: seqBase, max: maxQueued, wake: make(chan struct{}, 1), out: make(chan protocol.Event), done: make(chan struct{})}
	go o.pump()
	return o
}

// Events delivers the mapped events in wire order. It is closed after the
// engine's output ended and every event was delivered; the caller must
// keep draining.
func (o *Output) Events() <-chan protocol.Event { return o.out }

// Done is closed when the engine's output ended.
func (o *Output) Done() <-chan struct{} { return o.done }

// Err returns why the output ended (nil for a clean EOF) once Done is
// closed.
func (o *Output) Err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

// Push queues e, numbered next. Adapters push under their own lock, in
// wire order. Past the byte bound e is dropped (see Output).
func (o *Output) Push(e protocol.Event) {
	n := eventBytes(e)
	o.mu.Lock()
	o.closeHoleLocked()
	switch {
	case o.dropping:
		o.dropped++
		o.hole++
		o.mu.Unlock()
		return
	case o.bytes > 0 && o.bytes+n > o.max:
		// One event alone always fits: framing bounds it.
		o.dropping, o.hole, o.holeExec = true, 1, e.Execution
		o.dropped++
		o.mu.Unlock()
		return
	}
	o.queueLocked(e, n)
	o.mu.Unlock()
	o.poke()
}

// queueLocked numbers e next and queues it; n is its eventBytes.
func (o *Output) queueLocked(e protocol.Event, n int64) {
	o.seq++
	e.Seq = o.seq
	o.q = append(o.q, queued{e, n})
	o.bytes += n
}

// closeHoleLocked ends dropping once the reader took the queue down to
// half the bound, or the output ended: the one output-lost event that
// stands for the dropped events is queued then, when their count is
// known, and before any event pushed after them.
func (o *Output) closeHoleLocked() {
	if !o.dropping || (!o.ended && o.bytes > o.max/2) {
		return
	}
	e := protocol.Event{Record: protocol.RecordEvent, Kind: protocol.EventUnavailable, Execution: o.holeExec,
		Reason: protocol.ReasonOutputLost, Dropped: o.hole}
	o.queueLocked(e, eventBytes(e))
	o.dropping, o.hole = false, 0
}

// Dropped counts the events dropped past the byte bound.
func (o *Output) Dropped() uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.dropped
}

// eventBytes is what e holds in memory, near enough: its variable parts
// and a fixed overhead.
func eventBytes(e protocol.Event) int64 {
	n := eventOverhead + len(e.Message) + len(e.Role) + len(e.BlockType) + len(e.Text) + len(e.StopReason) + len(e.Reason) + len(e.Native)
	for _, b := range e.Content {
		n += eventOverhead + len(b.Type) + len(b.Text) + len(b.ToolCallID) + len(b.ToolName) + len(b.Args) + len(b.MimeType)
	}
	if t := e.Tool; t != nil {
		n += len(t.CallID) + len(t.Name) + len(t.Args) + len(t.Result)
	}
	if u := e.UI; u != nil {
		n += len(u.ID) + len(u.Method) + len(u.Title) + len(u.Message) + len(u.Key) + len(u.Level)
		for _, o := range u.Options {
			n += len(o) + 16
		}
	}
	return int64(n)
}

// End records why the output ended and closes Done; Events closes after
// the last queued event. Only the first call counts.
func (o *Output) End(err error) {
	o.finish.Do(func() {
		o.mu.Lock()
		o.err, o.ended = err, true
		o.closeHoleLocked()
		o.mu.Unlock()
		close(o.done)
		o.poke()
	})
}

func (o *Output) poke() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

func (o *Output) pump() {
	defer close(o.out)
	for {
		o.mu.Lock()
		batch, ended := o.q, o.ended
		o.q = nil
		o.mu.Unlock()
		for i, q := range batch {
			o.out <- q.e
			// Let go of it as its bytes stop counting: the batch would
			// otherwise hold every delivered event until its last is
			// taken, while the adapter queues the bound again.
			batch[i] = queued{}
			o.mu.Lock()
			o.bytes -= q.n
			o.closeHoleLocked()
			o.mu.Unlock()
		}
		if len(batch) > 0 {
			continue
		}
		if ended {
			return
		}
		<-o.wake
	}
}

// ReadLines reads an engine's stdout through lr until it ends: each line
// goes to handle (with what framing cut from it); a line over the bound
// (line-too-long) or one that does not reduce (undecodable-line) goes to
// lose, since its content is gone; end gets the cause, nil at EOF.
func ReadLines(lr *LineReader, handle func(line []byte, clip *Clip), lose func(reason string, cause error), end func(error)) {
	for {
		line, err := lr.Next()
		switch {
		case errors.Is(err, ErrLineTooLong):
			lose(protocol.ReasonLineTooLong, err)
			continue
		case errors.Is(err, ErrReduce):
			lose(protocol.ReasonUndecodable, err)
			continue
		case errors.Is(err, io.EOF):
			end(nil)
			return
		case err != nil:
			end(fmt.Errorf("read engine output: %w", err))
			return
		}
		handle(line, lr.Clip())
	}
}

// CloseWaiters wakes every command still waiting for a response once the
// output ended: a closed channel reads as ErrClosed. The caller holds the
// lock that guards m.
func CloseWaiters[T any](m map[string]chan T) {
	for id, ch := range m {
		close(ch)
		delete(m, id)
	}
}
