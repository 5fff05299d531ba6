package controller

import (
	"sync"

	"github.com/mosaic-agents/mosaic/protocol"
)

// Bus sizes. The ring holds the current execution's latest events for
// replay on attach; a subscriber's queue absorbs bursts for one reader.
const (
	ringSize  = 8192
	queueSize = 1024
	// ringBytes bounds the encoded events the ring holds: the oldest go
	// first past it. One event is bounded by engine framing (a reduced
	// line, engine.MaxLiveString per string), so a few large messages
	// shorten the replay window instead of growing memory.
	ringBytes = 64 << 20
)

// bus fans the engine's events out to observers and keeps a bounded ring
// of the current execution's events for replay. Publishing never blocks:
// an observer whose queue is full loses its place (it is detached and told
// where it stopped), so a slow reader can never slow the engine or the
// other clients.
type bus struct {
	mu        sync.Mutex
	execution string
	ring      []ringEntry // ring[i%ringSize] holds seq first+i
	first     uint64      // seq of the oldest event held (0: none)
	bytes     int         // encoded bytes of the events held
	last      uint64      // seq of the newest event published
	settled   uint64      // seq of the latest run-settled event
	dropped   uint64      // late events of other executions, never delivered (H14)
	subs      map[*subscriber]struct{}
}

type ringEntry struct {
	seq  uint64
	line []byte
}

// subscriber is one observer's live feed.
type subscriber struct {
	ch   chan []byte
	lost chan uint64 // receives the first seq it missed, once
	done bool
}

func newBus() *bus {
	return &bus{ring: make([]ringEntry, ringSize), subs: map[*subscriber]struct{}{}}
}

// reset starts a new execution: its events replace the old ring, and every
// subscriber learns of the new epoch from the events themselves.
func (b *bus) reset(execution string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.execution, b.first, b.last, b.settled, b.bytes = execution, 0, 0, 0, 0
	clear(b.ring) // the old execution's lines are never replayed again
}

// lastSettled returns the seq of the latest run-settled event: events
// after it belong to a run the session file may not fully hold yet.
func (b *bus) lastSettled() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.settled
}

// droppedLate counts events of other executions that were dropped.
func (b *bus) droppedLate() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.dropped
}

// publish encodes ev once and offers it to every subscriber.
func (b *bus) publish(ev protocol.Event) {
	line, err := protocol.Line(ev)
	if err != nil {
		return // an Event always encodes; nothing to deliver otherwise
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if ev.Execution != b.execution {
		b.dropped++ // late output of an old execution: never rendered (H14)
		return
	}
	if ev.Kind == protocol.EventRunSettled {
		b.settled = ev.Seq
	}
	if b.first == 0 {
		b.first = ev.Seq
	}
	for b.first < ev.Seq && (ev.Seq-b.first >= ringSize || b.bytes+len(line) > ringBytes) {
		b.evictOldest()
	}
	b.ring[ev.Seq%ringSize] = ringEntry{seq: ev.Seq, line: line}
	b.bytes += len(line)
	b.last = ev.Seq
	for s := range b.subs {
		select {
		case s.ch <- line:
		default:
			b.detach(s, ev.Seq)
		}
	}
}

// evictOldest drops the oldest event held from the replay window.
func (b *bus) evictOldest() {
	e := &b.ring[b.first%ringSize]
	if e.seq == b.first {
		b.bytes -= len(e.line)
		*e = ringEntry{}
	}
	b.first++
}

// detach drops a subscriber that fell behind and tells it the first seq
// it missed, so it can observe again from there (replay permitting).
func (b *bus) detach(s *subscriber, missed uint64) {
	delete(b.subs, s)
	s.done = true
	s.lost <- missed
	close(s.ch)
}

// window returns the replay window of the current execution.
func (b *bus) window() (execution string, from, until uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.execution, b.first, b.last
}

// subscribe returns the events after seq that the ring still holds, then
// a subscriber for everything published later: the two join without a gap
// or an overlap because both happen under one lock. complete is false when
// the ring no longer holds seq+1 (the caller must reconcile).
func (b *bus) subscribe(after uint64) (replay [][]byte, s *subscriber, complete bool) {
	replay, s, _, complete = b.subscribeFrom(after)
	return replay, s, complete
}

// subscribeFrom is subscribe that also returns first, the seq of the first
// event the subscriber gets: the first replayed, or the next live one.
func (b *bus) subscribeFrom(after uint64) (replay [][]byte, s *subscriber, first uint64, complete bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	complete = true
	start := after + 1
	if b.first != 0 && start < b.first {
		start, complete = b.first, false
	}
	if b.first != 0 {
		for seq := start; seq <= b.last; seq++ {
			replay = append(replay, b.ring[seq%ringSize].line)
		}
	}
	first = min(start, b.last+1)
	s = &subscriber{ch: make(chan []byte, queueSize), lost: make(chan uint64, 1)}
	b.subs[s] = struct{}{}
	return replay, s, first, complete
}

// unsubscribe removes s; it is a no-op for a detached subscriber.
func (b *bus) unsubscribe(s *subscriber) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s.done {
		return
	}
	delete(b.subs, s)
	s.done = true
	close(s.ch)
}
