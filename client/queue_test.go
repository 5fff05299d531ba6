package client

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/protocol"
)

func eventUpdate(seq uint64) Update {
	return Update{Record: protocol.RecordEvent, Event: &protocol.Event{Record: protocol.RecordEvent, Seq: seq}}
}

// TestQueueKeepsOrder pushes events and other records past a reader that
// pauses at random, so updates go straight into out, through the pump's
// batches and back: every one arrives once, in order.
func TestQueueKeepsOrder(t *testing.T) {
	const n = 200000
	q := newQueue(n + 1)
	go q.pump()
	go func() {
		r := rand.New(rand.NewPCG(1, 2))
		for i := uint64(1); i <= n; i++ {
			if i%97 == 0 {
				q.push(Update{Record: protocol.RecordBinding, Binding: &protocol.Binding{Record: protocol.RecordBinding, State: "active"}})
			}
			q.push(eventUpdate(i))
			if r.IntN(500) == 0 {
				time.Sleep(50 * time.Microsecond)
			}
		}
		q.close()
	}()
	r := rand.New(rand.NewPCG(3, 4))
	var next uint64 = 1
	others := 0
	for u := range q.out {
		if r.IntN(300) == 0 {
			time.Sleep(100 * time.Microsecond)
		}
		switch {
		case u.Event == nil:
			others++
		case u.Event.Seq != next:
			t.Fatalf("event %d, want %d", u.Event.Seq, next)
		default:
			next++
		}
	}
	if next != n+1 || others != n/97 {
		t.Fatalf("got %d events and %d other records, want %d and %d", next-1, others, n, n/97)
	}
}

// TestQueueBoundCountsEveryHolder fills out, the pump's batch and the
// waiting chain while nobody reads: the bound counts all three, so exactly
// limit events are kept, then one lost-place notice, and the rest dropped.
func TestQueueBoundCountsEveryHolder(t *testing.T) {
	for _, limit := range []int{outBuffer / 2, outBuffer + 10, 4 * outBuffer, 20 * runLen} {
		q := newQueue(limit)
		go q.pump()
		for i := 1; i <= 3*limit; i++ {
			q.push(eventUpdate(uint64(i)))
			if i%(runLen/2) == 0 {
				time.Sleep(time.Millisecond) // let the pump take a batch
			}
		}
		q.close()
		events, notices := 0, 0
		for u := range q.out {
			switch {
			case u.Event != nil:
				events++
			case u.Notice != nil && u.Notice.Kind == protocol.NoticeLostPlace:
				notices++
			}
		}
		if events != limit || notices != 1 {
			t.Errorf("limit %d: %d events and %d lost-place notices, want %d and 1", limit, events, notices, limit)
		}
	}
}

// TestQueueBoundCountsHandOverOnce: an update the pump has just sent into
// out, and not counted off yet, is in out and in held at once. The reader
// took one event at the bound, so one more fits; pushed while the pump
// stands there, it is kept and no place is lost, rather than the double
// count taking the queue for full.
func TestQueueBoundCountsHandOverOnce(t *testing.T) {
	for _, limit := range []int{outBuffer + 4, 3 * outBuffer} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			q := newQueue(limit)
			inWindow, resume := make(chan struct{}), make(chan struct{})
			stopped := false // the pump's alone
			q.sent = func() {
				if !stopped {
					stopped = true
					close(inWindow)
					<-resume
				}
			}
			asked := make(chan struct{})
			var once sync.Once
			q.asking = func() { once.Do(func() { close(asked) }) }
			go q.pump()
			for i := 1; i <= limit; i++ {
				q.push(eventUpdate(uint64(i)))
			}
			<-q.out // room: the pump sends an event into it and stops before counting it off
			<-inWindow
			pushed := make(chan struct{})
			go func() {
				q.push(eventUpdate(uint64(limit + 1)))
				close(pushed)
			}()
			select {
			case <-pushed: // decided while the pump stood in the hand-over
			case <-asked: // waits for the pump's own count
			}
			close(resume)
			<-pushed
			q.close()
			events, notices := 0, 0
			for u := range q.out {
				switch {
				case u.Event != nil:
					events++
				case u.Notice != nil && u.Notice.Kind == protocol.NoticeLostPlace:
					notices++
				}
			}
			if events != limit || notices != 0 {
				t.Errorf("%d events and %d lost-place notices after the reader took one at the bound and one more came; want %d and none", events, notices, limit)
			}
		})
	}
}
