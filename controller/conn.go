package controller

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/protocol"
)

// outSize bounds the records queued for one client; sendWait bounds how
// long a control record waits for room before the client is dropped as
// too slow.
const (
	outSize  = 256
	sendWait = 5 * time.Second
)

// errSlow means a client did not read its records in time.
var errSlow = errors.New("client too slow: its queue stayed full")

// conn is one client connection: records to it go through a bounded queue
// drained by its own writer, so no client can stall the controller.
type conn struct {
	id         string
	c          net.Conn
	peer       *audit.Peer
	enginePeer bool // the peer lives inside a mosaic engine scope
	hello      bool

	ctl     chan []byte // control records: replies, refusals, broadcasts
	out     chan []byte // events; the writer prefers ctl
	closing chan struct{}
	wdone   chan struct{} // closed when writeLoop returns
	once    sync.Once

	subMu sync.Mutex
	sub   *subscriber
}

func newConn(id string, c net.Conn) *conn {
	return &conn{id: id, c: c, ctl: make(chan []byte, outSize), out: make(chan []byte, outSize), closing: make(chan struct{}), wdone: make(chan struct{})}
}

// writeLoop drains the queues to the socket until the connection closes,
// control records first: a stream of events never delays a receipt.
func (k *conn) writeLoop() {
	defer close(k.wdone)
	for {
		var line []byte
		select {
		case line = <-k.ctl:
		default:
			select {
			case line = <-k.ctl:
			case line = <-k.out:
			case <-k.closing:
				return
			}
		}
		if !k.write(line) {
			k.close()
			return
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
		case line := <-k.ctl:
			if !k.write(line) {
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
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode record for connection %s: %w", k.id, err)
	}
	return k.put(k.ctl, append(b, '\n'), sendWait)
}

// enqueueCtl queues an encoded control record.
func (k *conn) enqueueCtl(line []byte) error { return k.put(k.ctl, line, sendWait) }

// enqueue queues an event line, waiting up to wait for room.
func (k *conn) enqueue(line []byte, wait time.Duration) error {
	return k.put(k.out, line, wait)
}

func (k *conn) put(q chan []byte, line []byte, wait time.Duration) error {
	select {
	case q <- line:
		return nil
	case <-k.closing:
		return net.ErrClosed
	default:
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case q <- line:
		return nil
	case <-k.closing:
		return net.ErrClosed
	case <-t.C:
		k.close()
		return errSlow
	}
}

// offer queues a line without waiting, for records sent while the
// controller's state lock is held. A client with no room is closed: the
// record must not be dropped silently, and it will reconcile on reconnect.
func (k *conn) offer(line []byte) {
	select {
	case k.ctl <- line:
	default:
		k.close()
	}
}

// follow forwards a bus subscription to the connection until it ends. A
// subscription that fell behind ends with a lost-place notice.
func (k *conn) follow(s *subscriber) {
	for line := range s.ch {
		if k.enqueue(line, sendWait) != nil {
			return
		}
	}
	select {
	case missed := <-s.lost:
		detail, _ := json.Marshal(map[string]uint64{"missedFrom": missed})
		k.send(protocol.Notice{Record: "notice", Kind: "lost-place", Detail: detail,
			Message: fmt.Sprintf("this connection read too slowly and lost its place at event %d; observe again with fromSeq", missed)})
	default:
	}
}

// subscribe replaces the connection's event subscription.
func (k *conn) subscribe(b *bus, s *subscriber) {
	k.subMu.Lock()
	old := k.sub
	k.sub = s
	k.subMu.Unlock()
	if old != nil {
		b.unsubscribe(old)
	}
	go k.follow(s)
}

func (k *conn) unsubscribe(b *bus) {
	k.subMu.Lock()
	s := k.sub
	k.sub = nil
	k.subMu.Unlock()
	if s != nil {
		b.unsubscribe(s)
	}
}
