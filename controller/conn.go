package controller

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/mosaic-agents/mosaic/activation"
	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/protocol"
)

// outSize is the control channel's capacity; records past it wait in the
// connection's overflow, bounded by bytes only (maxQueuedPerConn and the
// server's budget). A count bound would let an engine that writes a burst
// of native UI lines (each a notice or approval to every client) drop
// every client that reads promptly but one record per write behind.
const (
	outSize = 256
	// maxQueuedPerConn bounds the bytes of control records queued for one
	// connection: room for a few full history pages.
	maxQueuedPerConn = 32 << 20
)

// errSlow means a client did not read its records in time.
var errSlow = errors.New("client too slow: its unread records passed the byte budget")

// conn is one client connection: control records to it go through a
// bounded queue and events through a cursor into the bus's ring, both
// drained by its own writer, so no client can stall the controller.
//
// Each observe starts an epoch of the connection's event stream: its
// observed record carries the epoch on the control queue, and its feed
// (the cursor) carries it too. The writer takes events only from a feed
// of the epoch of the latest observed record it wrote, so no event of a
// replaced subscription follows the observed record that replaced it.
type conn struct {
	id    string
	c     net.Conn
	peer  *audit.Peer // what the journal names: uid and pid
	hello bool
	runs  bool // its hello named protocol.RunsSince or later

	// The peer's identity: its pidfd and the judge that classifies it at
	// accept and again at every control command. Once an engine peer,
	// always one (engine, why): a peer that moves itself out of its scope
	// after the hello, or exits, gains nothing.
	// queue is the server's budget for queued control records; qheld is
	// this connection's part of it (qdone once the connection is gone).
	queue *budget
	qmu   sync.Mutex
	qheld int
	qdone bool

	peerMu sync.Mutex
	ident  *activation.Peer
	judge  *activation.Judge
	engine bool
	why    string

	wait time.Duration // writeTimeout, but for tests
	ctl  chan record   // control records: replies, refusals, broadcasts
	// over holds control records queued while ctl was full, in order
	// after everything in ctl: once it is not empty every record goes
	// there, and the writer drains ctl before it. lost is set when the
	// connection was dropped: nothing more is queued to it, so a client
	// never reads past a record it did not get.
	omu     sync.Mutex
	over    []record
	lost    bool
	kick    chan struct{} // a control record was queued, the feed may have events, or was replaced
	closing chan struct{}
	wdone   chan struct{} // closed when writeLoop returns
	once    sync.Once

	subMu sync.Mutex
	feed  *feed  // the live subscription being forwarded, if any
	epoch uint64 // of the latest observe; only that observe touches it
}

// record is one encoded control line; a non-zero epoch marks an observed
// record that starts that epoch.
type record struct {
	line  []byte
	epoch uint64
}

// feed is a bus subscription the connection's writer drains, in one
// epoch.
type feed struct {
	bus   *bus
	s     *subscriber
	epoch uint64
	runs  bool // the connection takes runs of deltas (runs.go)
}

func newConn(id string, c net.Conn) *conn {
	return &conn{id: id, c: c, wait: writeTimeout, ctl: make(chan record, outSize), kick: make(chan struct{}, 1), closing: make(chan struct{}), wdone: make(chan struct{})}
}

// judgePeer classifies the peer now and returns whether it is an engine
// peer and why. A connection without a judge is one (fail closed).
func (k *conn) judgePeer() (bool, string) {
	k.peerMu.Lock()
	defer k.peerMu.Unlock()
	switch {
	case k.engine:
	case k.judge == nil || k.ident == nil:
		k.engine, k.why = true, "the peer's identity was never read"
	default:
		if v := k.judge.Judge(k.ident); v.Engine {
			k.engine, k.why = true, v.Reason
		}
	}
	return k.engine, k.why
}

// enginePeer reports the latest verdict without judging again.
func (k *conn) enginePeer() bool {
	k.peerMu.Lock()
	defer k.peerMu.Unlock()
	return k.engine
}

// writeLoop drains the control queue and the feed to the socket until
// the connection closes, control records first: a stream of events never
// delays a receipt. Before each batch of events it writes the control
// records queued ahead of it, so an observed record always precedes its
// replay, and it takes events only from the feed of the epoch the latest
// observed record it wrote started. A batch is everything the feed holds
// (up to batchEvents and batchBytes) in one writev, so a reader that
// falls behind catches up in a few large writes instead of one line at a
// time.
func (k *conn) writeLoop() {
	defer close(k.wdone)
	var epoch uint64 // of the latest observed record written
	var pieces []piece
	var lines [][]byte
	var buf []byte // the runs of one batch
	for {
		if !k.writeCtl(&epoch) {
			k.drop()
			return
		}
		if f := k.current(); f != nil && f.epoch == epoch {
			var lost uint64
			pieces, lost = f.bus.take(f.s, pieces[:0])
			if lost != 0 {
				if k.endFeed(f) && !k.write(lostPlaceLine(lost)) {
					k.drop()
					return
				}
				continue
			}
			if len(pieces) > 0 {
				lines, buf = linesOf(pieces, lines[:0], buf[:0], f.runs)
				ok := k.writeBatch(lines)
				clear(pieces) // let the ring's lines go
				clear(lines)
				if cap(buf) > batchBytes {
					buf = nil
				}
				if !ok {
					k.drop()
					return
				}
				continue
			}
		}
		select {
		case <-k.kick: // a control record was queued (enqueue), or the feed moved
		case <-k.closing:
			return
		}
	}
}

// writeCtl writes the control records queued now, the channel's then the
// overflow's, in batches of one writev each (a burst of broadcasts costs
// a few writes, not one per record), noting the epoch of an observed
// record among them.
func (k *conn) writeCtl(epoch *uint64) bool {
	var lines [][]byte
	for {
		batch := k.takeCtl()
		if len(batch) == 0 {
			return true
		}
		lines = lines[:0]
		var ep uint64
		for _, r := range batch {
			k.unreserve(len(r.line))
			lines = append(lines, r.line)
			if r.epoch != 0 {
				ep = r.epoch
			}
		}
		ok := k.writeBatch(lines)
		clear(lines)
		if !ok {
			return false
		}
		if ep != 0 {
			*epoch = ep
		}
	}
}

// takeCtl takes what the channel holds now, then the overflow.
func (k *conn) takeCtl() []record {
	var batch []record
	for {
		select {
		case r := <-k.ctl:
			batch = append(batch, r)
		default: // the overflow only once ctl is empty: it follows ctl
			return append(batch, k.takeOver()...)
		}
	}
}

// takeOver empties the overflow. Called with ctl drained: a record
// queued meanwhile goes to ctl only once the overflow is empty, so it is
// written after the batch taken here.
func (k *conn) takeOver() []record {
	k.omu.Lock()
	defer k.omu.Unlock()
	b := k.over
	k.over = nil
	return b
}

// writeBatch writes event lines in one writev (a few, past IOV_MAX).
// writeTimeout bounds a write that makes no progress, as it does for a
// single line: a reader that takes a large batch slowly but steadily is
// slow, not stalled (the bus takes its place if it falls too far behind),
// and cutting it off mid-batch would end it on half a line.
func (k *conn) writeBatch(lines [][]byte) bool {
	bufs := net.Buffers(lines)
	for {
		k.c.SetWriteDeadline(time.Now().Add(k.wait))
		n, err := bufs.WriteTo(k.c) // consumes bufs as it writes
		switch {
		case err == nil:
			return true
		case n == 0 || !errors.Is(err, os.ErrDeadlineExceeded):
			return false
		}
	}
}

func (k *conn) write(line []byte) bool {
	k.c.SetWriteDeadline(time.Now().Add(writeTimeout))
	_, err := k.c.Write(line)
	return err == nil
}

// flush writes the control records still queued, for a connection about
// to close (a refusal that explains the close must reach the client).
func (k *conn) flush() {
	<-k.wdone // never interleave with the writer
	var epoch uint64
	k.writeCtl(&epoch)
}

func (k *conn) close() {
	k.once.Do(func() { close(k.closing) })
}

// drop closes a connection that is too slow or whose write failed. Its
// reader may be blocked on a client that sends nothing (a stalled client
// does not write either), so the read is ended too: the handler returns
// and the socket closes now, not at the client's next line.
func (k *conn) drop() {
	k.omu.Lock()
	k.lost = true
	k.omu.Unlock()
	k.close()
	k.c.SetReadDeadline(time.Now())
}

// send queues one record. A client whose queue stays full is closed: a
// control record (receipt, refusal, control change) must not be dropped
// silently, so the client loses the connection and reconciles on reconnect.
func (k *conn) send(v any) error {
	line, err := protocol.Line(v)
	if err != nil {
		return fmt.Errorf("encode record for connection %s: %w", k.id, err)
	}
	return k.put(record{line: line})
}

// enqueueCtl queues an encoded control record.
func (k *conn) enqueueCtl(line []byte) error {
	return k.put(record{line: line})
}

// put queues a control record behind everything queued before it. The
// byte budget is the bound: a client whose unread records exceed it is
// dropped as too slow.
func (k *conn) put(r record) error {
	if !k.reserve(len(r.line)) {
		k.drop()
		return errSlow
	}
	if !k.enqueue(r) {
		k.unreserve(len(r.line))
		return net.ErrClosed
	}
	return nil
}

// enqueue queues r in order: on the channel while nothing waits in the
// overflow and the channel has room, else in the overflow, and wakes the
// writer. False after a drop.
func (k *conn) enqueue(r record) bool {
	k.omu.Lock()
	if k.lost {
		k.omu.Unlock()
		return false
	}
	queued := false
	if len(k.over) == 0 {
		select {
		case k.ctl <- r:
			queued = true
		default:
		}
	}
	if !queued {
		k.over = append(k.over, r)
	}
	k.omu.Unlock()
	signal(k.kick)
	return true
}

// offer queues a line without waiting, for records sent while the
// controller's state lock is held. A client past its byte budget is
// closed: the record must not be dropped silently, and it will reconcile
// on reconnect.
func (k *conn) offer(line []byte) { k.offerEpoch(line, 0) }

// offerEpoch is offer for a record that may start an epoch (an observed
// record).
func (k *conn) offerEpoch(line []byte, epoch uint64) {
	if !k.reserve(len(line)) {
		k.drop()
		return
	}
	if !k.enqueue(record{line: line, epoch: epoch}) {
		k.unreserve(len(line))
	}
}

// reserve accounts n bytes of a control record about to be queued: at
// most maxQueuedPerConn on one connection and the server's queue budget
// in all (an observed record carries a history page of up to 8 MiB, and
// a client that asks for pages without reading them must not make the
// controller hold them). False means the client is too slow: close it.
func (k *conn) reserve(n int) bool {
	if k.queue == nil {
		return true
	}
	k.qmu.Lock()
	defer k.qmu.Unlock()
	if k.qdone || k.qheld+n > maxQueuedPerConn || !k.queue.take(n) {
		return false
	}
	k.qheld += n
	return true
}

// unreserve gives back the bytes of a record taken off the queue.
func (k *conn) unreserve(n int) {
	if k.queue == nil {
		return
	}
	k.qmu.Lock()
	defer k.qmu.Unlock()
	if k.qdone {
		return
	}
	k.qheld -= n
	k.queue.give(n)
}

// releaseQueue gives back whatever the connection still holds when it is
// gone; records queued later are refused.
func (k *conn) releaseQueue() {
	if k.queue == nil {
		return
	}
	k.qmu.Lock()
	defer k.qmu.Unlock()
	k.qdone = true
	k.queue.give(k.qheld)
	k.qheld = 0
}

// follow makes s, a subscription whose wake channel is k.kick, the
// connection's feed in epoch; the caller ended the previous feed
// (unsubscribe) and queued the observed record that starts epoch.
func (k *conn) follow(b *bus, s *subscriber, epoch uint64) {
	k.subMu.Lock()
	k.feed = &feed{bus: b, s: s, epoch: epoch, runs: k.runs}
	k.subMu.Unlock()
	signal(k.kick)
}

// current returns the connection's feed, if any.
func (k *conn) current() *feed {
	k.subMu.Lock()
	defer k.subMu.Unlock()
	return k.feed
}

// endFeed forgets f, a feed that lost its place, and reports whether it
// was still the connection's feed: an observe that replaced it meanwhile
// makes a lost-place notice stale (it would only send the client back).
func (k *conn) endFeed(f *feed) bool {
	k.subMu.Lock()
	defer k.subMu.Unlock()
	if k.feed != f {
		return false
	}
	k.feed = nil
	return true
}

// lag is how many events the connection's feed has yet to take.
func (k *conn) lag() int {
	f := k.current()
	if f == nil {
		return 0
	}
	return f.bus.lag(f.s)
}

// lostPlaceLine is the notice a connection gets when it fell too far
// behind: missed is the first event it will not get.
func lostPlaceLine(missed uint64) []byte {
	detail, _ := json.Marshal(map[string]uint64{"missedFrom": missed})
	line, _ := protocol.Line(protocol.Notice{Record: protocol.RecordNotice, Kind: protocol.NoticeLostPlace, Detail: detail,
		Message: fmt.Sprintf("this connection read too slowly and lost its place at event %d (it fell %d events or %d MiB behind); observe again with fromSeq", missed, maxLag, maxLagBytes>>20)})
	return line
}

// unsubscribe ends the connection's feed, if any: the bus forgets its
// cursor and the writer takes nothing more from it.
func (k *conn) unsubscribe(b *bus) {
	k.subMu.Lock()
	f := k.feed
	k.feed = nil
	k.subMu.Unlock()
	if f != nil {
		b.unsubscribe(f.s)
	}
}
