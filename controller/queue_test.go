package controller

import (
	"errors"
	"net"
	"strings"
	"testing"
)

// TestControlQueueBudget: control records queued for a client that does
// not read count against the server's queue budget; the record that does
// not fit closes the connection as too slow, and what the connection held
// is given back when it is gone, so one slow reader cannot keep others'
// records out.
func TestControlQueueBudget(t *testing.T) {
	srv, cli := net.Pipe()
	defer cli.Close()
	q := &budget{max: 1 << 20}
	k := newConn("k-test", srv)
	k.queue = q // no writeLoop: nothing is read off the queue
	page := map[string]string{"record": "observed", "history": strings.Repeat("x", 200<<10)}
	var err error
	sent := 0
	for ; sent < 10 && err == nil; sent++ {
		err = k.send(page)
	}
	if !errors.Is(err, errSlow) {
		t.Fatalf("after %d records of 200 KiB into a 1 MiB budget: %v; want errSlow", sent, err)
	}
	select {
	case <-k.closing:
	default:
		t.Fatal("the slow connection was not closed")
	}
	if used := q.inUse(); used == 0 || used > q.max {
		t.Fatalf("budget in use %d; want within (0, %d]", used, q.max)
	}
	other := newConn("k-other", srv)
	other.queue = q
	k.releaseQueue()
	if used := q.inUse(); used != 0 {
		t.Fatalf("budget in use after the connection is gone: %d", used)
	}
	if err := other.send(page); err != nil {
		t.Fatalf("another connection after the release: %v", err)
	}
}
