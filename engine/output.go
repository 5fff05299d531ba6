package engine

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/mosaic-agents/mosaic/protocol"
)

// Output is the read side both engine adapters share: the mapped events,
// handed to the reader in order through a queue without bound (so a slow
// reader never stalls the goroutine that reads the engine, and with it
// the responses commands wait for), and when and why the engine's output
// ended. An adapter's Conn embeds it.
type Output struct {
	mu     sync.Mutex
	q      []protocol.Event
	ended  bool
	err    error
	wake   chan struct{}
	out    chan protocol.Event
	done   chan struct{}
	finish sync.Once
}

// NewOutput starts the delivery goroutine; it ends after End once every
// queued event was delivered.
func NewOutput() *Output {
	o := &Output{wake: make(chan struct{}, 1), out: make(chan protocol.Event), done: make(chan struct{})}
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

// Push queues e. Adapters push under their own lock, in wire order.
func (o *Output) Push(e protocol.Event) {
	o.mu.Lock()
	o.q = append(o.q, e)
	o.mu.Unlock()
	o.poke()
}

// End records why the output ended and closes Done; Events closes after
// the last queued event. Only the first call counts.
func (o *Output) End(err error) {
	o.finish.Do(func() {
		o.mu.Lock()
		o.err, o.ended = err, true
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
		for _, e := range batch {
			o.out <- e
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
