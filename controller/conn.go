package controller

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/mosaic-agents/mosaic/activation"
	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/protocol"
)

// outSize bounds the records queued for one client; sendWait bounds how
// long a control record waits for room before the client is dropped as
// too slow.
const (
	outSize  = 256
	sendWait = 5 * time.Second
	// maxQueuedPerConn bounds the bytes of control records queued for one
	// connection: room for a few full history pages.
	maxQueuedPerConn = 32 << 20
)

// errSlow means a client did not read its records in time.
var errSlow = errors.New("client too slow: its queue stayed full")

// errStopped means a wait for room ended because its feed was replaced.
var errStopped = errors.New("feed replaced by a new observe")

// conn is one client connection: records to it go through a bounded queue
// drained by its own writer, so no client can stall the controller.
//
// Each observe starts an epoch of the connection's event stream: its
// observed record carries the epoch on the control queue, and its replay
// and live events carry it on the event queue. The writer sends an event
// only in the epoch of the latest observed record it wrote, so no event of
// a replaced subscription follows the observed record that replaced it.
type conn struct {
	id    string
	c     net.Conn
	peer  *audit.Peer // what the journal names: uid and pid
	hello bool

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

	ctl     chan record // control records: replies, refusals, broadcasts
	out     chan record // events; the writer prefers ctl
	closing chan struct{}
	wdone   chan struct{} // closed when writeLoop returns
	once    sync.Once

	subMu sync.Mutex
	feed  *feed  // the live subscription being forwarded, if any
	epoch uint64 // of the latest observe; only that observe touches it
}

// record is one encoded line on a queue. On the control queue a non-zero
// epoch marks an observed record that starts that epoch; on the event
// queue it is the epoch the event was queued for.
type record struct {
	line  []byte
	epoch uint64
}

// feed is a bus subscription forwarded to the connection by its own
// goroutine, in one epoch.
type feed struct {
	s     *subscriber
	epoch uint64
	stop  chan struct{} // closed to end the forwarding
	done  chan struct{} // closed when the forwarding goroutine returned
}

func newConn(id string, c net.Conn) *conn {
	return &conn{id: id, c: c, ctl: make(chan record, outSize), out: make(chan record, outSize), closing: make(chan struct{}), wdone: make(chan struct{})}
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

// writeLoop drains the queues to the socket until the connection closes,
// control records first: a stream of events never delays a receipt. Before
// an event it writes the control records queued ahead of it, so an
// observed record always precedes its replay, and it drops the events of
// epochs an observed record already replaced.
func (k *conn) writeLoop() {
	defer close(k.wdone)
	var epoch uint64 // of the latest observed record written
	for {
		var r record
		select {
		case r = <-k.ctl:
			k.unreserve(len(r.line))
		default:
			select {
			case r = <-k.ctl:
				k.unreserve(len(r.line))
			case ev := <-k.out:
				if !k.writeCtl(&epoch) {
					k.close()
					return
				}
				if ev.epoch != epoch {
					continue // queued for a subscription since replaced
				}
				r = record{line: ev.line}
			case <-k.closing:
				return
			}
		}
		if r.epoch != 0 {
			epoch = r.epoch
		}
		if !k.write(r.line) {
			k.close()
			return
		}
	}
}

// writeCtl writes the control records queued now, noting the epoch of
// an observed record among them.
func (k *conn) writeCtl(epoch *uint64) bool {
	for {
		select {
		case r := <-k.ctl:
			k.unreserve(len(r.line))
			if r.epoch != 0 {
				*epoch = r.epoch
			}
			if !k.write(r.line) {
				return false
			}
		default:
			return true
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
	for {
		select {
		case r := <-k.ctl:
			k.unreserve(len(r.line))
			if !k.write(r.line) {
				return
			}
		default:
			return
		}
	}
}

func (k *conn) close() {
	k.once.Do(func() { close(k.closing) })
}

// send queues one record. A client whose queue stays full is closed: a
// control record (receipt, refusal, control change) must not be dropped
// silently, so the client loses the connection and reconciles on reconnect.
func (k *conn) send(v any) error {
	line, err := protocol.Line(v)
	if err != nil {
		return fmt.Errorf("encode record for connection %s: %w", k.id, err)
	}
	return k.put(k.ctl, record{line: line}, sendWait, nil)
}

// enqueueCtl queues an encoded control record.
func (k *conn) enqueueCtl(line []byte) error {
	return k.put(k.ctl, record{line: line}, sendWait, nil)
}

// enqueue queues an event line of epoch, waiting up to wait for room.
func (k *conn) enqueue(line []byte, epoch uint64, wait time.Duration) error {
	return k.put(k.out, record{line: line, epoch: epoch}, wait, nil)
}

// put queues r, waiting up to wait for room; a closed stop ends the wait.
func (k *conn) put(q chan record, r record, wait time.Duration, stop <-chan struct{}) error {
	if q == k.ctl {
		if !k.reserve(len(r.line)) {
			k.close()
			return errSlow
		}
		err := k.putWait(q, r, wait, stop)
		if err != nil {
			k.unreserve(len(r.line))
		}
		return err
	}
	return k.putWait(q, r, wait, stop)
}

func (k *conn) putWait(q chan record, r record, wait time.Duration, stop <-chan struct{}) error {
	select {
	case q <- r:
		return nil
	case <-k.closing:
		return net.ErrClosed
	default:
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case q <- r:
		return nil
	case <-k.closing:
		return net.ErrClosed
	case <-stop:
		return errStopped
	case <-t.C:
		k.close()
		return errSlow
	}
}

// offer queues a line without waiting, for records sent while the
// controller's state lock is held. A client with no room is closed: the
// record must not be dropped silently, and it will reconcile on reconnect.
func (k *conn) offer(line []byte) { k.offerEpoch(line, 0) }

// offerEpoch is offer for a record that may start an epoch (an observed
// record).
func (k *conn) offerEpoch(line []byte, epoch uint64) {
	if !k.reserve(len(line)) {
		k.close()
		return
	}
	select {
	case k.ctl <- record{line: line, epoch: epoch}:
	default:
		k.unreserve(len(line))
		k.close()
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

// follow starts forwarding s to the connection in epoch; the caller ended
// the previous feed (unsubscribe).
func (k *conn) follow(s *subscriber, epoch uint64) {
	f := &feed{s: s, epoch: epoch, stop: make(chan struct{}), done: make(chan struct{})}
	k.subMu.Lock()
	k.feed = f
	k.subMu.Unlock()
	go k.forward(f)
}

// forward copies a feed's events to the event queue until it ends or is
// stopped. A subscription that fell behind ends with a lost-place notice;
// a stopped one ends silently, since an observe replaced it.
func (k *conn) forward(f *feed) {
	defer close(f.done)
	for {
		select {
		case <-f.stop:
			return
		case line, ok := <-f.s.ch:
			if !ok {
				k.lostPlace(f)
				return
			}
			if k.put(k.out, record{line: line, epoch: f.epoch}, sendWait, f.stop) != nil {
				return
			}
		}
	}
}

func (k *conn) lostPlace(f *feed) {
	select {
	case <-f.stop:
		return // replaced: a stale notice would only send the client back
	default:
	}
	select {
	case missed := <-f.s.lost:
		detail, _ := json.Marshal(map[string]uint64{"missedFrom": missed})
		b, err := json.Marshal(protocol.Notice{Record: protocol.RecordNotice, Kind: protocol.NoticeLostPlace, Detail: detail,
			Message: fmt.Sprintf("this connection read too slowly and lost its place at event %d; observe again with fromSeq", missed)})
		if err == nil {
			k.put(k.ctl, record{line: append(b, '\n')}, sendWait, f.stop)
		}
	default:
	}
}

// unsubscribe ends the connection's feed, if any: the bus forgets its
// subscriber and its goroutine stops. It returns a channel closed once
// that goroutine queues nothing more.
func (k *conn) unsubscribe(b *bus) <-chan struct{} {
	k.subMu.Lock()
	f := k.feed
	k.feed = nil
	k.subMu.Unlock()
	if f == nil {
		return closedChan
	}
	close(f.stop)
	b.unsubscribe(f.s)
	return f.done
}

// closedChan is an already closed channel, for waits with nothing to wait on.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()
