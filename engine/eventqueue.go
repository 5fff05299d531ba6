package engine

import (
	"sync"

	"github.com/mosaic-agents/mosaic/protocol"
)

// EventQueue hands an adapter's events to its reader in order, queuing
// without bound so a slow reader never stalls the goroutine that reads
// the engine (and with it the responses commands wait for). Both engine
// adapters use it.
type EventQueue struct {
	mu     sync.Mutex
	q      []protocol.Event
	closed bool
	wake   chan struct{}
	out    chan protocol.Event
}

// NewEventQueue starts the queue's delivery goroutine; it ends after
// Close once every queued event was delivered.
func NewEventQueue() *EventQueue {
	q := &EventQueue{wake: make(chan struct{}, 1), out: make(chan protocol.Event)}
	go q.pump()
	return q
}

// Out delivers the events in Push order; closed after Close and the last
// event.
func (q *EventQueue) Out() <-chan protocol.Event { return q.out }

// Push queues e. Callers that need a total order push under their own
// lock.
func (q *EventQueue) Push(e protocol.Event) {
	q.mu.Lock()
	q.q = append(q.q, e)
	q.mu.Unlock()
	q.poke()
}

// Close says no event follows.
func (q *EventQueue) Close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.poke()
}

func (q *EventQueue) poke() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *EventQueue) pump() {
	defer close(q.out)
	for {
		q.mu.Lock()
		batch, closed := q.q, q.closed
		q.q = nil
		q.mu.Unlock()
		for _, e := range batch {
			q.out <- e
		}
		if len(batch) > 0 {
			continue
		}
		if closed {
			return
		}
		<-q.wake
	}
}
