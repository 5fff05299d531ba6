package main

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/mosaic-agents/mosaic/client"
)

// errEnded: the connection ended before the record a verb waits for.
var errEnded = errors.New("the connection to the controller ended")

// tape keeps every update of one connection in order, so a verb can look
// for a record that arrived before it started looking (a stop broadcast
// precedes the receipt that names it), and counts the replies it has read.
type tape struct {
	mu      sync.Mutex
	recs    []client.Update
	replies int
	wake    chan struct{} // closed and replaced on every change
	ended   bool
}

// record starts reading c's updates onto a tape. With echo set, every
// record except an observed page is written to it as one JSON line, in
// the order received (--json).
func record(c *client.Client, echo io.Writer) *tape {
	t := &tape{wake: make(chan struct{})}
	go func() {
		for u := range c.Updates() {
			if echo != nil && u.Observed == nil {
				echo.Write(append(u.Raw, '\n'))
			}
			t.add(u)
		}
		t.end()
	}()
	return t
}

func (t *tape) add(u client.Update) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.recs = append(t.recs, u)
	if u.Reply {
		t.replies++
	}
	close(t.wake)
	t.wake = make(chan struct{})
}

func (t *tape) end() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ended = true
	close(t.wake)
	t.wake = make(chan struct{})
}

// next returns the record at *i, waiting for it, and advances *i.
func (t *tape) next(ctx context.Context, i *int) (client.Update, error) {
	for {
		t.mu.Lock()
		if *i < len(t.recs) {
			u := t.recs[*i]
			*i++
			t.mu.Unlock()
			return u, nil
		}
		ended, wake := t.ended, t.wake
		t.mu.Unlock()
		if ended {
			return client.Update{}, errEnded
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return client.Update{}, context.Cause(ctx)
		}
	}
}

// find returns the index of the first record at or after *i that match
// accepts, waiting for it, and moves *i past it.
func (t *tape) find(ctx context.Context, i *int, match func(client.Update) bool) (client.Update, error) {
	for {
		u, err := t.next(ctx, i)
		if err != nil || match(u) {
			return u, err
		}
	}
}

// all returns a copy of the records so far.
func (t *tape) all() []client.Update {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]client.Update(nil), t.recs...)
}

// caughtUp waits until the tape has read n replies: every reply a command
// method returned is then on the tape (and echoed), with all before it.
func (t *tape) caughtUp(ctx context.Context, n int) {
	for {
		t.mu.Lock()
		done, wake := t.replies >= n || t.ended, t.wake
		t.mu.Unlock()
		if done {
			return
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return
		}
	}
}
