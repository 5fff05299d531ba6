package web

import (
	"fmt"
	"io"
	"net"
	"sync"

	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/protocol"
)

// perScopeConns bounds the loopback connections open at once whose peer
// sockets were made inside one engine scope (or whose maker cannot be
// found out). Every request is judged, and a refused one closes its
// connection, but a connection costs the server a descriptor, a
// goroutine and its buffers from accept on, and an engine's tool can open
// them as fast as it likes and send nothing (each then lives until the
// header timeout). The kernel records the cgroup a socket was made in,
// and nothing the process does later changes it; counted by the engine
// scope that holds that cgroup, a tool's sub-cgroups share one bound.
//
// Sockets made outside every engine scope are not bounded: the user's
// browser is one cgroup, and any page it shows can make it open
// connections to the port under as many host names as it likes
// (*.localhost), each refused, so a bound per cgroup there was the page's
// to fill, and the user's own connections were closed at accept.
//
// Alternatives weighed: a bound per source address (a tool has all of
// 127/8); judging in full at accept (a judgement reads every process's
// descriptors, and the flood would choose how often).
const perScopeConns = 32

// capListener bounds each engine scope's connections. Where a
// connection's socket was made is found out in its own goroutine, at its
// first read: finding a new cgroup's path reads every process's cgroup,
// and the accept loop must not wait on that for the user's connections.
type capListener struct {
	net.Listener
	scope   func(net.Conn) (unit string, known bool)
	refused func(remote, scope string, open int)

	mu   sync.Mutex
	open map[string]int // by engine scope; "" for a maker not found out
}

func (l *capListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &cappedConn{Conn: c, l: l}, nil
}

// admit counts c under its engine scope, or says it is past the bound.
func (l *capListener) admit(c net.Conn) (key string, counted, ok bool) {
	unit, known := l.scope(c)
	if known && unit == "" {
		return "", false, true
	}
	l.mu.Lock()
	n := l.open[unit]
	if n < perScopeConns {
		l.open[unit] = n + 1
	}
	l.mu.Unlock()
	if n >= perScopeConns {
		l.refused(c.RemoteAddr().String(), unit, n)
		return unit, false, false
	}
	return unit, true, true
}

func (l *capListener) release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[key]--; l.open[key] <= 0 {
		delete(l.open, key)
	}
}

// cappedConn is admitted at its first read, and gives its place back once
// however often it is closed.
type cappedConn struct {
	net.Conn
	l       *capListener
	admit   sync.Once
	key     string
	counted bool
	denied  bool
	close   sync.Once
}

func (c *cappedConn) Read(b []byte) (int, error) {
	c.admit.Do(func() {
		var ok bool
		c.key, c.counted, ok = c.l.admit(c.Conn)
		c.denied = !ok
	})
	if c.denied {
		c.Close()
		return 0, io.EOF
	}
	return c.Conn.Read(b)
}

func (c *cappedConn) Close() error {
	err := c.Conn.Close()
	c.close.Do(func() {
		// admit ran (or never will: closing first takes its place).
		c.admit.Do(func() {})
		if c.counted {
			c.l.release(c.key)
		}
	})
	return err
}

// capped wraps a loopback TCP listener in its bound; any other is
// returned as it is (a Unix socket's peer is judged by its credentials,
// and the engines cannot reach the web socket's directory).
func (s *Server) capped(l net.Listener) net.Listener {
	if _, ok := l.Addr().(*net.TCPAddr); !ok {
		return l
	}
	return &capListener{Listener: l, open: map[string]int{}, scope: s.judge.SocketScope,
		refused: func(remote, scope string, open int) {
			if s.refusals == nil {
				return
			}
			if scope == "" {
				scope = "a cgroup that cannot be found out"
			}
			s.refusals.Log(audit.Entry{Event: audit.Refusal, Connection: remote, Refusal: protocol.CodeWebPeer,
				Message: fmt.Sprintf("closed at its first read: %d connections whose sockets were made in %s are open already", open, scope)})
		}}
}
