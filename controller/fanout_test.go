package controller

import (
	"bufio"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/protocol"
)

// pipeConn is a connection whose client end is cli, an unbuffered pipe
// the test reads (or does not), and a bus in execution e1.
func pipeConn(t *testing.T) (*conn, *bus, net.Conn) {
	t.Helper()
	srv, cli := net.Pipe()
	t.Cleanup(func() { cli.Close() })
	b := newBus()
	b.reset("e1")
	return newConn("k-"+t.Name(), srv), b, cli
}

// startWriter runs k's writer until the test ends.
func startWriter(t *testing.T, k *conn) {
	t.Helper()
	go k.writeLoop()
	t.Cleanup(func() { k.close(); <-k.wdone })
}

// observeAll makes k observe every event of b in epoch 1, after an
// observed line, and starts its writer.
func observeAll(t *testing.T, k *conn, b *bus) *subscriber {
	t.Helper()
	s, _, _ := b.subscribeFrom(0, k.kick)
	k.offerEpoch([]byte(`{"record":"observed"}`+"\n"), 1)
	k.follow(b, s, 1)
	startWriter(t, k)
	return s
}

// TestStalledConnectionDetached: a connection whose client never reads
// (its writer blocked on its first batch) is detached once it is maxLag
// events behind, that is at most maxLag events past the batch in its
// writer's hands, without holding publishing back; the bus keeps
// nothing for it after that. Once the client reads again it gets the
// batch, contiguous from the first event, and then a lost-place notice
// naming exactly the first event it did not get.
func TestStalledConnectionDetached(t *testing.T) {
	k, b, cli := pipeConn(t) // unbuffered: the writer blocks on its first write
	s := observeAll(t, k, b)
	other, _, _ := b.subscribeFrom(0, nil)
	var got [][]byte
	bound := uint64(maxLag + batchEvents + 1)
	for i := uint64(1); i <= bound; i++ {
		b.publish(ev("e1", i))
		var lost uint64
		if got, lost = takeLines(b, other, got); lost != 0 {
			t.Fatalf("a reader in step lost its place at %d", lost)
		}
	}
	contiguous(t, "the other subscriber", got, 1, bound)
	b.mu.Lock()
	_, fed := b.subs[s]
	lostAt := s.lostAt
	b.mu.Unlock()
	if fed || lostAt == 0 {
		t.Fatalf("after %d events the stalled connection is still fed (cursor at %d)", bound, s.next)
	}
	if lostAt > batchEvents+1 {
		t.Fatalf("lost its place at %d: its writer took more than one batch of %d", lostAt, batchEvents)
	}
	rd := bufio.NewReaderSize(cli, 1<<20)
	read := func() []byte {
		t.Helper()
		cli.SetReadDeadline(time.Now().Add(30 * time.Second))
		line, err := rd.ReadBytes('\n')
		if err != nil {
			t.Fatal(err)
		}
		return line
	}
	if l := read(); string(l) != `{"record":"observed"}`+"\n" {
		t.Fatalf("first line %q", l)
	}
	for want := uint64(1); want < lostAt; want++ {
		if seq := seqOf(t, read()); seq != want {
			t.Fatalf("event seq %d, want %d", seq, want)
		}
	}
	var n protocol.Notice
	if err := json.Unmarshal(read(), &n); err != nil || n.Kind != protocol.NoticeLostPlace {
		t.Fatalf("after the batch: %+v (%v), want a lost-place notice", n, err)
	}
	var d struct {
		MissedFrom uint64 `json:"missedFrom"`
	}
	if json.Unmarshal(n.Detail, &d); d.MissedFrom != lostAt {
		t.Fatalf("missedFrom %d, want %d", d.MissedFrom, lostAt)
	}
}

// TestWriterBatchesInOrder: a connection's writer drains what its feed
// holds in batches; the client reads every event once, in order, with a
// control record queued mid-stream arriving whole between two lines.
func TestWriterBatchesInOrder(t *testing.T) {
	k, b, cli := pipeConn(t)
	observeAll(t, k, b)
	n := uint64(3*batchEvents + 11)
	go func() {
		for i := uint64(1); i <= n; i++ {
			b.publish(ev("e1", i))
			if i == n/2 {
				k.enqueueCtl([]byte(`{"record":"receipt"}` + "\n"))
			}
		}
	}()
	rd := bufio.NewReaderSize(cli, 1<<20)
	next, receipts := uint64(1), 0
	for next <= n {
		cli.SetReadDeadline(time.Now().Add(30 * time.Second))
		line, err := rd.ReadBytes('\n')
		if err != nil {
			t.Fatalf("after seq %d: %v", next-1, err)
		}
		var m struct {
			Record string `json:"record"`
			Seq    uint64 `json:"seq"`
		}
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		switch m.Record {
		case "observed":
		case "receipt":
			receipts++
		case protocol.RecordEvent:
			if m.Seq != next {
				t.Fatalf("event seq %d, want %d", m.Seq, next)
			}
			next++
		default:
			t.Fatalf("unexpected %q", line)
		}
	}
	if receipts != 1 {
		t.Fatalf("%d receipts, want 1", receipts)
	}
}

// TestSlowBatchNotCutOff: a client that reads a batch slowly, but never
// pauses for a whole write timeout, gets all of it: the deadline bounds a
// write without progress, not the batch. (Before, the batch's write ended
// at the first deadline, and the client on half a line.)
//
// The pauses are the scheduler's as much as the reader's: on a loaded
// machine a reader that sleeps a third of the timeout can still be held
// off the CPU for a whole one, and then the cut-off is right. A run in
// which a pause may have reached the timeout proves nothing either way and
// is made again.
func TestSlowBatchNotCutOff(t *testing.T) {
	const wait = 100 * time.Millisecond
	for try := 1; ; try++ {
		ok, pause := slowBatch(t, wait)
		if pause < wait {
			if !ok {
				t.Fatalf("writeBatch gave up on a reader that kept reading (longest pause %s, timeout %s)", pause, wait)
			}
			return
		}
		if try == 50 {
			t.Fatalf("in %d runs the reader was never kept from pausing a whole write timeout (%s, last %s)", try, wait, pause)
		}
		t.Logf("run %d: the reader paused up to %s, the timeout is %s: made again", try, pause, wait)
	}
}

// slowBatch writes a batch of 12 lines to a reader that reads it slowly,
// pausing wait/3 before each read, and says whether writeBatch kept on to
// the end, and the longest time the reader may have gone without taking
// a write. That bound holds whenever the reader was descheduled: the
// write handed over in a read happens after the clock is read before it
// and before the clock is read after it, so two handovers are less than
// the time from the clock before the first read to the clock after the
// second apart.
func slowBatch(t *testing.T, wait time.Duration) (ok bool, pause time.Duration) {
	k, _, cli := pipeConn(t)
	k.wait = wait
	lines := make([][]byte, 12)
	for i := range lines {
		lines[i] = []byte(strings.Repeat("x", 99) + "\n")
	}
	done := make(chan bool, 1)
	last := time.Now() // before the writer sets its first deadline
	go func() {
		ok := k.writeBatch(lines)
		if !ok {
			cli.Close() // ends the reads below at once
		}
		done <- ok
	}()
	buf := make([]byte, 1000)
	cli.SetReadDeadline(time.Now().Add(30 * time.Second)) // bounds a hang only
	for read := 0; read < len(lines)*100; {
		time.Sleep(wait / 3) // every read well within the deadline, the batch over several
		before := time.Now()
		n, err := cli.Read(buf)
		after := time.Now()
		pause = max(pause, after.Sub(last))
		last = before
		if err != nil {
			// Cut off: the pause up to now says whether rightly.
			return <-done, pause
		}
		read += n
	}
	return <-done, pause
}
