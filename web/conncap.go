package web

import (
	"fmt"
	"net"
	"sync"

	"github.com/mosaic-agents/mosaic/activation"
	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/protocol"
)

// perCgroupConns bounds the loopback connections open at once whose peer
// socket was made in one cgroup. Every request is judged, and a refused
// one closes its connection, but a connection costs the server a
// descriptor, a goroutine and its buffers from accept on, and an engine's
// tool can open them as fast as it likes and send nothing (each then
// lives until the header timeout): counted by the cgroup its socket was
// made in, which the kernel records and nothing the process does later
// changes, a tool holds at most this many per cgroup it may make (a scope
// bounds them: scopes.MaxToolCgroups). A browser opens at most six
// connections to one host per profile, and its processes share a cgroup.
//
// Alternatives weighed: a bound per source address (a tool has all of
// 127/8); judging at accept (a judgement reads every process's
// descriptors, and the flood would choose how often); one bound for all
// (a tool would fill it and keep the user's browser out).
const perCgroupConns = 32

// capListener closes at once a loopback connection past perCgroupConns.
type capListener struct {
	net.Listener
	refused func(remote string, cgroup uint64, open int)

	mu   sync.Mutex
	open map[uint64]int
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		// Unknown (0): the kernel did not say; such peers share one count,
		// and their requests are refused by the judge anyway.
		cg, _ := activation.SocketCgroup(c)
		l.mu.Lock()
		n := l.open[cg]
		if n < perCgroupConns {
			l.open[cg] = n + 1
		}
		l.mu.Unlock()
		if n >= perCgroupConns {
			c.Close()
			l.refused(c.RemoteAddr().String(), cg, n)
			continue
		}
		return &countedConn{Conn: c, done: func() { l.release(cg) }}, nil
	}
}

func (l *capListener) release(cg uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[cg]--; l.open[cg] <= 0 {
		delete(l.open, cg)
	}
}

// countedConn gives its place back once, however often it is closed.
type countedConn struct {
	net.Conn
	once sync.Once
	done func()
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.done)
	return err
}

// capped wraps a loopback TCP listener in its bound; any other is
// returned as it is (a Unix socket's peer is judged by its credentials,
// and the engines cannot reach the web socket's directory).
func (s *Server) capped(l net.Listener) net.Listener {
	if _, ok := l.Addr().(*net.TCPAddr); !ok {
		return l
	}
	return &capListener{Listener: l, open: map[uint64]int{}, refused: func(remote string, cg uint64, open int) {
		if s.refusals == nil {
			return
		}
		s.refusals.Log(audit.Entry{Event: audit.Refusal, Connection: remote, Refusal: protocol.CodeWebPeer,
			Message: fmt.Sprintf("closed at accept: %d connections whose sockets were made in cgroup %d are open already", open, cg)})
	}}
}
