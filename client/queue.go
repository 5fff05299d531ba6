package client

import (
	"sync"
	"sync/atomic"

	"github.com/mosaic-agents/mosaic/protocol"
)

// queue carries updates from the read loop to Updates without ever
// blocking the read loop on the reader: replies must reach their waiters
// even while nobody reads Updates (a caller may be blocked in Prompt on
// the same goroutine that drains it). Events are bounded; past the bound
// the queue drops them and loses its place like a slow connection does at
// the server, until the next observed record. Other records are few and
// never dropped.
type queue struct {
	out chan Update

	mu       sync.Mutex
	items    chain
	events   int          // events in items
	held     atomic.Int64 // events the pump took from items and has not sent yet
	taken    int          // held when the pump took its batch: held is never more
	pumping  bool         // the pump holds a batch: a push must not overtake it
	limit    int
	dropping bool          // lost place: events are dropped until an observed
	closed   bool          // no more pushes; out closes once items are delivered
	stopped  bool          // the consumer is gone; drop everything
	wake     chan struct{} // a push or close happened
	quitc    chan struct{} // closed by quit

	// At the bound the read loop asks the pump for its count (exact);
	// batchEnd says the pump sent its whole batch and holds nothing.
	ask      chan struct{}
	told     chan int
	batchEnd chan struct{}

	// Test hooks: sent runs after the pump sent an update and before it
	// counts it off; asking before the read loop asks the pump.
	sent, asking func()
}

// outBuffer is how many updates wait in Updates' channel itself: a reader
// and the pump then hand over runs of updates instead of switching
// goroutines at every one. They count toward the queue's event bound.
const outBuffer = 128

func newQueue(limit int) *queue {
	return &queue{out: make(chan Update, outBuffer), limit: limit,
		wake: make(chan struct{}, 1), quitc: make(chan struct{}),
		ask: make(chan struct{}), told: make(chan int), batchEnd: make(chan struct{}, 1)}
}

// item is an update waiting in the queue. An event, by far the most
// frequent, is its event and line (an Update holding only those, with
// Record "event"), a fifth of an Update's size, so a backlog copies and
// clears less; any other update is boxed whole.
type item struct {
	ev  *protocol.Event
	raw []byte
	u   *Update
}

// eventItem is the item of an event update from the read loop, which
// sets nothing else on it.
func eventItem(ev *protocol.Event, raw []byte) item { return item{ev: ev, raw: raw} }

func (it *item) event() *protocol.Event {
	if it.u != nil {
		return it.u.Event
	}
	return it.ev
}

func (it *item) update() Update {
	if it.u != nil {
		return *it.u
	}
	return Update{Record: protocol.RecordEvent, Raw: it.raw, Event: it.ev}
}

// push appends u, or drops it if it is an event past the bound.
func (q *queue) push(u Update) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.addLocked(item{u: &u})
}

// pushEvents appends the read loop's events in order, under one lock.
func (q *queue) pushEvents(events []item) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, it := range events {
		q.addLocked(it)
	}
}

// addLocked appends it, or drops it if it is an event past the bound.
// When nothing is waiting before it, it goes straight into out if there
// is room: a reader that keeps up then costs no hand-off through the
// pump. Callers hold q.mu.
func (q *queue) addLocked(it item) {
	if q.closed || q.stopped {
		return
	}
	switch ev := it.event(); {
	case ev != nil && q.dropping:
		return
	case ev != nil && q.full():
		q.dropping = true
		lost := lostPlace(ev.Seq)
		it = item{u: &lost}
	case it.u != nil && it.u.Observed != nil:
		q.dropping = false
	}
	if q.items.empty() && !q.pumping {
		// Never blocks, and out cannot be closed under q.mu: the pump
		// closes it only after it saw closed or stopped here.
		select {
		case q.out <- it.update():
			return
		default:
		}
	}
	if it.event() != nil {
		q.events++
	}
	q.items.add(it)
	q.signal()
}

// full says whether the events queued, held by the pump and in out reach
// the bound. Far from it, as a reader that keeps up is, it reads neither
// held nor out's length, which the pump and the reader of Updates write.
// Near it, held and out's length read together count an event the pump
// has sent and not counted off yet twice (and more than one if the pump
// ran on between the two reads), never none: under the bound that way it
// is under, and at or over it only pumped says.
func (q *queue) full() bool {
	if q.events+q.taken+outBuffer < q.limit {
		return false
	}
	if q.events+int(q.held.Load())+len(q.out) < q.limit {
		return false
	}
	return q.events+q.pumped() >= q.limit
}

// pumped counts the events the pump holds and the updates in out, at a
// moment it has no update half handed over. Nothing read here can tell an
// event the pump is still blocked on (out full) from one it just sent
// into out in its place (out full again): only the pump knows, so it is
// asked, and answers where it waits on out. A pump that is idle, or
// between batches (held 0: it takes the next one only under q.mu, which
// the caller holds), holds nothing to count twice. The pump waits on
// neither q.mu nor the reader before it blocks on out or ends its batch,
// so the wait is short. Callers hold q.mu.
func (q *queue) pumped() int {
	for {
		if h := q.held.Load(); !q.pumping || h == 0 {
			return int(h) + len(q.out)
		}
		if q.asking != nil {
			q.asking()
		}
		select {
		case q.ask <- struct{}{}:
			return <-q.told
		case <-q.batchEnd:
		}
	}
}

// close says no more updates will come; out closes once the rest is read.
func (q *queue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.signal()
}

// quit discards what is queued and closes out at once.
func (q *queue) quit() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.stopped {
		q.closed, q.stopped, q.items = true, true, chain{}
		close(q.quitc)
	}
}

func (q *queue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// pump delivers items to out in order until the queue is closed and empty
// or quit. It takes everything waiting in one batch (one lock, and the
// slices swap instead of growing) and is, with a push that finds nothing
// waiting, the only sender on out and the only one to close it; after a
// quit it empties out's buffer first, so what was not read is discarded.
func (q *queue) pump() {
	defer func() {
		if q.isStopped() {
			for len(q.out) > 0 {
				select {
				case <-q.out:
				default:
				}
			}
		}
		close(q.out)
	}()
	for {
		q.mu.Lock()
		if q.stopped || (q.closed && q.items.empty()) {
			q.mu.Unlock()
			return
		}
		if q.items.empty() {
			q.pumping = false
			q.mu.Unlock()
			select {
			case <-q.wake:
			case <-q.quitc:
			}
			continue
		}
		batch := q.items.take()
		q.held.Store(int64(q.events))
		q.taken, q.events = q.events, 0
		q.pumping = true
		q.mu.Unlock()
		for b := batch; b != nil; b = b.next {
			for i := range b.n {
				it := &b.items[i]
				// A send that finds room takes out's lock once; the
				// select with quitc, which locks both channels, is only
				// for a full out.
				select {
				case q.out <- it.update():
				default:
					if !q.send(it) {
						return
					}
				}
				if q.sent != nil {
					q.sent()
				}
				if it.event() != nil {
					q.held.Add(-1)
				}
			}
			clear(b.items[:b.n])
		}
		select {
		case q.batchEnd <- struct{}{}:
		default:
		}
		q.mu.Lock()
		q.items.recycle(batch)
		q.mu.Unlock()
	}
}

// send waits for room in out for it, answering the read loop's count
// meanwhile: it is in hand, not in out, so held and out's length count it
// once. False after a quit.
func (q *queue) send(it *item) bool {
	for {
		select {
		case q.out <- it.update():
			return true
		case <-q.ask:
			q.told <- int(q.held.Load()) + len(q.out)
		case <-q.quitc:
			return false
		}
	}
}

// runLen is how many items one block of a chain holds.
const runLen = 128

// run is one block of a chain.
type run struct {
	items [runLen]item
	n     int
	next  *run
}

// chain is the items waiting for the pump, oldest first, in blocks: a
// backlog grows a block at a time and nothing already queued is copied.
type chain struct {
	head, tail *run
	free       *run // one emptied block kept for the next backlog
}

func (c *chain) empty() bool { return c.head == nil }

func (c *chain) add(it item) {
	if c.tail == nil || c.tail.n == runLen {
		b := c.free
		if b != nil {
			c.free = nil
		} else {
			b = new(run)
		}
		if c.tail == nil {
			c.head = b
		} else {
			c.tail.next = b
		}
		c.tail = b
	}
	c.tail.items[c.tail.n] = it
	c.tail.n++
}

// take empties the chain and returns its blocks.
func (c *chain) take() *run {
	h := c.head
	c.head, c.tail = nil, nil
	return h
}

// recycle keeps one of the sent (and cleared) blocks for reuse.
func (c *chain) recycle(sent *run) {
	if c.free == nil && sent != nil {
		sent.n, sent.next = 0, nil
		c.free = sent
	}
}

func (q *queue) isStopped() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.stopped
}
