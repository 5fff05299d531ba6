package controller

import (
	"sync"

	"github.com/mosaic-agents/mosaic/protocol"
)

// Bus sizes. The ring holds the current execution's latest events, both
// for replay on attach and as every subscriber's queue: a subscriber is a
// cursor into it, so the ring's bounds are also how far behind a reader
// may fall before it loses its place.
const (
	ringSize = 16384
	// ringBytes bounds the encoded events the ring holds: the oldest go
	// first past it. One event is bounded by engine framing (a reduced
	// line, engine.MaxLiveString per string), so a few large messages
	// shorten the replay window instead of growing memory.
	ringBytes = 64 << 20
	// maxLag and maxLagBytes are how far behind the newest event a
	// subscriber may fall before it loses its place: half the ring, so the
	// event it missed is still held when it observes again with fromSeq
	// (for as many events again), and a resume is complete unless that
	// observe comes very late.
	maxLag      = ringSize / 2
	maxLagBytes = ringBytes / 2
)

// Batch bounds: what one take hands a connection's writer, so a batch in
// a blocked write (a client that stopped reading) pins little and a
// reader that loses its place hears of it soon after the batch.
const (
	batchEvents = 1024 // iovecs in one writev (IOV_MAX)
	batchBytes  = 256 << 10
)

// bus fans the engine's events out to observers and keeps a bounded ring
// of the current execution's events. Each event is encoded once; each
// subscriber is a cursor into the ring that its connection's writer
// drains in batches. Publishing never blocks and never waits for a
// reader: a subscriber loses its place only when it falls maxLag events or
// maxLagBytes of encoded events behind the newest (whichever comes first),
// or, with an event larger than the rest of the ring, when the ring
// overwrites its cursor. It is detached then and told where it stopped,
// so a stalled reader holds nothing and slows nobody, and the ring still
// holds where it stopped for a resume.
type bus struct {
	mu        sync.Mutex
	execution string
	ring      []ringEntry // ring[i%ringSize] holds seq first+i
	first     uint64      // seq of the oldest event held (0: none)
	bytes     int         // encoded bytes of the events held
	total     uint64      // encoded bytes of the execution's events so far
	last      uint64      // seq of the newest event published
	settled   uint64      // seq of the latest run-settled event
	dropped   uint64      // late events of other executions, never delivered (H14)
	subs      map[*subscriber]struct{}
}

type ringEntry struct {
	seq  uint64
	line []byte
	at   uint64  // the execution's bytes before this event (bus.total then)
	mark runMark // how it joins a run of deltas (runs.go)
}

// subscriber is one observer's cursor into the ring. Its fields are
// guarded by the bus's lock.
type subscriber struct {
	next   uint64   // seq of the next event to take; 0: the execution's first
	old    [][]byte // a replaced execution's events it had not taken yet
	lostAt uint64   // first seq it missed, once the ring overwrote its cursor
	done   bool     // no longer fed: unsubscribed or lost
	wake   chan struct{}
}

func newBus() *bus {
	return &bus{ring: make([]ringEntry, ringSize), subs: map[*subscriber]struct{}{}}
}

// reset starts a new execution: its events replace the old ring. A
// subscriber still behind in the old execution keeps the lines it had not
// taken (references, not copies) and then follows the new execution from
// its first event: it learns of the new epoch from the events themselves.
func (b *bus) reset(execution string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs {
		if s.next != 0 && b.first != 0 {
			for seq := max(s.next, b.first); seq <= b.last; seq++ {
				s.old = append(s.old, b.ring[seq%ringSize].line)
			}
		}
		s.next = 0
	}
	b.execution, b.first, b.last, b.settled, b.bytes, b.total = execution, 0, 0, 0, 0, 0
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

// publish encodes ev once, adds it to the ring and wakes every
// subscriber; one now too far behind loses its place. The line leaves out
// an engine's raw values that a client's strict decoding would refuse
// (Event.Strict): one such line would end every observer's connection.
func (b *bus) publish(ev protocol.Event) {
	line, err := protocol.Line(ev.Strict())
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
		for s := range b.subs {
			if s.next == 0 {
				s.next = ev.Seq
			}
		}
	}
	for b.first < ev.Seq && (ev.Seq-b.first >= ringSize || b.bytes+len(line) > ringBytes) {
		b.evictOldest()
	}
	// The newest event's key, if the ring still holds it, is shared by a
	// delta of the same block (reset clears the ring, eviction its
	// entries).
	mark := markOf(&ev, line, b.ring[b.last%ringSize].mark.key)
	b.ring[ev.Seq%ringSize] = ringEntry{seq: ev.Seq, line: line, at: b.total, mark: mark}
	b.bytes += len(line)
	b.total += uint64(len(line))
	b.last = ev.Seq
	for s := range b.subs {
		if b.behind(s) {
			b.lose(s, s.next)
		}
		signal(s.wake)
	}
}

// behind says whether s has fallen too far behind to keep its place: its
// cursor overwritten, or maxLag events or maxLagBytes behind the newest.
func (b *bus) behind(s *subscriber) bool {
	switch {
	case s.next == 0 || s.next > b.last:
		return false // nothing to take
	case s.next < b.first:
		return true
	}
	return b.last-s.next >= maxLag || b.total-b.ring[s.next%ringSize].at > maxLagBytes
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

// lose detaches a subscriber that fell behind: it keeps only the first
// seq it missed, for its lost-place notice, so it can observe again from
// there (replay permitting).
func (b *bus) lose(s *subscriber, missed uint64) {
	delete(b.subs, s)
	s.done, s.lostAt, s.old = true, missed, nil
}

// window returns the replay window of the current execution.
func (b *bus) window() (execution string, from, until uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.execution, b.first, b.last
}

// subscribeFrom places a cursor after seq and returns it with first, the
// seq of the first event the subscriber takes: the first replayed, or the
// next live one. Replay and live are one stream read from the ring, so
// they join without a gap or an overlap. complete is false when the ring
// no longer holds seq+1 (the caller must reconcile). wake, if not nil, is
// signalled (without blocking) whenever there may be more to take.
func (b *bus) subscribeFrom(after uint64, wake chan struct{}) (s *subscriber, first uint64, complete bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	complete = true
	start := after + 1
	if b.first != 0 && start < b.first {
		start, complete = b.first, false
	}
	first = min(start, b.last+1)
	if wake == nil {
		wake = make(chan struct{}, 1)
	}
	s = &subscriber{next: first, wake: wake}
	if b.first == 0 {
		s.next = 0 // nothing held yet: from the execution's first event
	}
	b.subs[s] = struct{}{}
	signal(wake)
	return s, first, complete
}

// take appends to pieces the events s has not taken yet, up to
// batchEvents and batchBytes (at least one event), and advances its
// cursor past them. lost is the first seq s missed once the ring
// overwrote its cursor (then nothing more comes), 0 otherwise.
func (b *bus) take(s *subscriber, pieces []piece) (_ []piece, lost uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s.lostAt != 0 {
		return pieces, s.lostAt
	}
	start, n := len(pieces), 0
	full := func(line []byte) bool {
		k := len(pieces) - start
		return k > 0 && (k >= batchEvents || n+len(line) > batchBytes)
	}
	for len(s.old) > 0 && !full(s.old[0]) {
		pieces, n = append(pieces, piece{line: s.old[0]}), n+len(s.old[0])
		s.old[0] = nil
		s.old = s.old[1:]
	}
	if len(s.old) > 0 {
		signal(s.wake)
		return pieces, 0
	}
	if s.done || s.next == 0 || b.first == 0 {
		return pieces, 0
	}
	for ; s.next <= b.last; s.next++ {
		e := &b.ring[s.next%ringSize]
		if full(e.line) {
			signal(s.wake) // more to take: the writer comes back at once
			break
		}
		pieces, n = append(pieces, piece{line: e.line, seq: e.seq, mark: e.mark}), n+len(e.line)
	}
	return pieces, 0
}

// lag is how many events s has yet to take.
func (b *bus) lag(s *subscriber) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(s.old)
	if s.next != 0 && !s.done {
		n += int(b.last + 1 - s.next)
	}
	return n
}

// unsubscribe removes s; it is a no-op for a detached subscriber.
func (b *bus) unsubscribe(s *subscriber) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s.done {
		return
	}
	delete(b.subs, s)
	s.done, s.old = true, nil
}

// signal wakes the reader of c without blocking: c holds one pending
// wake-up, which stands for any number of events.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
