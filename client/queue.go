package client

import "sync"

// queue carries updates from the read loop to Updates without ever
// blocking the read loop: replies must reach their waiters even while
// nobody reads Updates (a caller may be blocked in Prompt on the same
// goroutine that drains it). Events are bounded; past the bound the queue
// drops them and loses its place like a slow connection does at the server,
// until the next observed record. Other records are few and never dropped.
type queue struct {
	out chan Update

	mu       sync.Mutex
	items    []Update
	events   int // events in items
	limit    int
	dropping bool          // lost place: events are dropped until an observed
	closed   bool          // no more pushes; out closes once items are delivered
	stopped  bool          // the consumer is gone; drop everything
	wake     chan struct{} // a push or close happened
	quitc    chan struct{} // closed by quit
}

// outBuffer is how many updates wait in Updates' channel itself: a reader
// and the pump then hand over runs of updates instead of switching
// goroutines at every one. They count toward the queue's event bound.
const outBuffer = 128

func newQueue(limit int) *queue {
	return &queue{out: make(chan Update, outBuffer), limit: limit,
		wake: make(chan struct{}, 1), quitc: make(chan struct{})}
}

// push appends u, or drops it if it is an event past the bound.
func (q *queue) push(u Update) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || q.stopped {
		return
	}
	switch {
	case u.Event != nil && q.dropping:
		return
	case u.Event != nil && q.events+len(q.out) >= q.limit:
		q.dropping = true
		u = lostPlace(u.Event.Seq)
	case u.Event != nil:
		q.events++
	case u.Observed != nil:
		q.dropping = false
	}
	q.items = append(q.items, u)
	q.signal()
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
		q.closed, q.stopped, q.items = true, true, nil
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
// or quit. It is the only goroutine that sends on or closes out; after a
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
		if q.stopped || (q.closed && len(q.items) == 0) {
			q.mu.Unlock()
			return
		}
		if len(q.items) == 0 {
			q.mu.Unlock()
			select {
			case <-q.wake:
			case <-q.quitc:
			}
			continue
		}
		u := q.items[0]
		q.items[0] = Update{}
		q.items = q.items[1:]
		if u.Event != nil {
			q.events--
		}
		q.mu.Unlock()
		select {
		case q.out <- u:
		case <-q.quitc:
			return
		}
	}
}

func (q *queue) isStopped() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.stopped
}
