package controller

import (
	"context"
	"sync"

	"github.com/mosaic-agents/mosaic/protocol"
)

// StartGate lets a Server answer hellos while its Controller is still
// starting (reading the session head, the claim, launching the engine and
// checking what it loaded): a socket-activated controller's first client
// gets its welcome as soon as its connection is accepted and judged. A
// connection that said hello is then held, unread, until Open: it is
// attached (its binding sent, the first one it sees) and its commands read
// only once Start has finished, so nothing is ever admitted against an
// engine that is not up, and the first binding says what it said when
// the welcome waited for Start. The alternative, a binding that says
// "launching" with admission closed, would change what a client's first
// binding means and refuse every command sent meanwhile.
type StartGate struct {
	once sync.Once
	done chan struct{}
	err  error

	hello    sync.Once
	welcomed chan struct{}
}

// NewStartGate returns a closed gate: Open it when Start returns.
func NewStartGate() *StartGate {
	return &StartGate{done: make(chan struct{}), welcomed: make(chan struct{})}
}

// Welcomed is closed once the server answered its first hello (with a
// welcome or a refusal). `serve` waits for it, for a bounded moment,
// before it starts the engine: the connection that activated the socket
// is answered first, and the start-up does not compete with it for the
// CPU.
func (g *StartGate) Welcomed() <-chan struct{} { return g.welcomed }

// answered notes that a hello was answered.
func (g *StartGate) answered() {
	if g != nil {
		g.hello.Do(func() { close(g.welcomed) })
	}
}

// Open releases the held connections. With err (Start failed: the
// controller must not serve) each is refused with err's code and closed,
// and Serve stops accepting and returns err. Only the first Open counts.
func (g *StartGate) Open(err error) {
	g.once.Do(func() {
		g.err = err
		close(g.done)
	})
}

// starting says whether Start has not returned yet (false for a nil
// gate: the controller was started before Serve).
func (g *StartGate) starting() bool {
	if g == nil {
		return false
	}
	select {
	case <-g.done:
		return false
	default:
		return true
	}
}

// failed returns Start's error once the gate is open, nil before.
func (g *StartGate) failed() error {
	select {
	case <-g.done:
		return g.err
	default:
		return nil
	}
}

// awaitStart holds k, which said hello, until the controller started. It
// reports false when k must end: the start failed (k is told why), the
// server is shutting down, or k was dropped.
func (s *Server) awaitStart(ctx context.Context, k *conn) bool {
	g := s.Started
	if g == nil {
		return true
	}
	select {
	case <-g.done:
	case <-ctx.Done():
		return false
	case <-k.closing:
		return false
	}
	if g.err == nil {
		return true
	}
	code := protocol.CodeOf(g.err)
	if code == "" {
		code = protocol.CodeServeFailed
	}
	s.refuse(k, "", protocol.Wrap(code, g.err, "the controller could not start, so this connection is closed"))
	return false
}
