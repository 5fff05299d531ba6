package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/mosaic-agents/mosaic/activation"
	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/protocol"
	"golang.org/x/sys/unix"
)

// writeTimeout bounds one write to a client.
const writeTimeout = 10 * time.Second

// Transport bounds (docs/protocol.md §1; `serve` flags set them). The
// defaults leave an operator's handful of clients far from every cap while
// keeping a flood from inside an engine scope to a few hundred MiB at most.
const (
	// DefaultMaxConns caps open connections, observers included.
	DefaultMaxConns = 256
	// DefaultHelloTimeout bounds the time from accept to a complete hello.
	DefaultHelloTimeout = 10 * time.Second
	// DefaultIdleTimeout bounds the silence before the hello: a
	// connection that sends no byte for this long is closed.
	DefaultIdleTimeout = 5 * time.Second
	// DefaultMaxBuffered caps the bytes held for unfinished client lines
	// across all connections.
	DefaultMaxBuffered = 64 << 20
	// DefaultMaxQueued caps the bytes of control records (replies,
	// observed records with their history page) queued for clients that
	// have not read them yet, across all connections; a client whose
	// record does not fit is closed as too slow.
	DefaultMaxQueued = 256 << 20

	// fdReserve is kept free under RLIMIT_NOFILE for everything that is
	// not a connection: the engine's pipes, the session watch, history
	// reads, claims, the bus, the journal.
	fdReserve = 128
	// fdsPerConn is what one connection holds: its socket and the peer's
	// pidfd.
	fdsPerConn = 2
)

// ConnLimit returns the connection cap for a configured one (0: the
// default): at most what RLIMIT_NOFILE leaves after fdReserve, two fds a
// connection, and never below one. It also returns the soft limit read.
func ConnLimit(configured int) (int, uint64) {
	if configured <= 0 {
		configured = DefaultMaxConns
	}
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return configured, 0
	}
	avail := 1
	if rl.Cur > fdReserve+fdsPerConn {
		avail = int(min(rl.Cur-fdReserve, 1<<30) / fdsPerConn)
	}
	return max(1, min(configured, avail)), rl.Cur
}

// Server serves one conversation's socket. With a Controller it serves
// the control protocol; without one (a conversation that cannot launch,
// or a transport test) it serves hello and refuses everything else.
type Server struct {
	Conversation string
	Version      string // the server version named in welcome
	UID          int    // the only peer uid admitted
	MaxLine      int    // cap on one client line; 0 means protocol.MaxLine
	Audit        *audit.Logger
	Controller   *Controller
	// Started, when set, is opened once Controller.Start has returned:
	// hellos are answered before, commands read only after (StartGate).
	// Nil means the controller was started before Serve.
	Started *StartGate

	MaxConns     int           // cap on open connections (0: DefaultMaxConns), lowered by ConnLimit
	HelloTimeout time.Duration // accept to complete hello (0: DefaultHelloTimeout)
	IdleTimeout  time.Duration // silence before the hello (0: DefaultIdleTimeout)
	MaxBuffered  int64         // bytes of unfinished lines, all connections (0: DefaultMaxBuffered)
	MaxQueued    int64         // bytes of control records queued, all connections (0: DefaultMaxQueued)

	judge    *activation.Judge
	lines    *budget
	queue    *budget
	limit    int
	refusals *burstLog

	mu         sync.Mutex
	conns      map[string]*conn
	open       int // connections accepted and not yet closed
	engineOpen int // of which engine peers (as judged at accept)
	wg         sync.WaitGroup
}

// Serve accepts connections on l until ctx is done or l fails. It returns
// nil after a shutdown through ctx, once every connection has ended.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	judge, err := activation.NewJudge()
	if err != nil {
		l.Close()
		return err
	}
	s.mu.Lock()
	s.conns = map[string]*conn{}
	s.judge = judge
	s.limit, _ = ConnLimit(s.MaxConns)
	s.lines = &budget{max: cmp.Or(s.MaxBuffered, DefaultMaxBuffered)}
	s.queue = &budget{max: cmp.Or(s.MaxQueued, DefaultMaxQueued)}
	s.refusals = newBurstLog(s.Audit, refusalWindow)
	s.mu.Unlock()
	defer s.refusals.flush()
	stop := context.AfterFunc(ctx, func() { l.Close(); s.closeAll() })
	defer stop()
	defer s.wg.Wait()
	if g := s.Started; g != nil {
		// A failed start ends serving: the held connections are told
		// why (awaitStart), and nothing new is accepted.
		go func() {
			select {
			case <-g.done:
				if g.err != nil {
					l.Close()
				}
			case <-ctx.Done():
			}
		}()
	}
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if s.Started != nil && s.Started.failed() != nil {
				return s.Started.failed()
			}
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("accept on conversation socket: %w", err)
			}
			// A transient failure (EMFILE, ECONNABORTED) must not end the
			// controller: back off briefly and keep serving.
			time.Sleep(50 * time.Millisecond)
			continue
		}
		// The peer is read and judged here, before a goroutine exists for
		// it, so the engine peers' share of the cap is exact.
		p, perr := activation.OpenPeer(c)
		v := activation.Verdict{Engine: true, Reason: "the peer's credentials cannot be read"}
		if perr == nil {
			v = s.judge.Judge(p)
		}
		if !s.admit(v.Engine) {
			p.Close()
			s.refuseFull(c, v.Engine)
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer s.leave(v.Engine)
			s.handle(ctx, c, p, perr, v)
		}()
	}
}

// admit counts a new connection unless the cap is reached, or, for an
// engine peer, the engine peers' share of it: the last eighth of the cap
// is kept for everyone else, so a flood from inside an engine scope never
// locks the operator out.
func (s *Server) admit(engine bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open >= s.limit || engine && s.engineOpen >= s.engineShare() {
		return false
	}
	s.open++
	if engine {
		s.engineOpen++
	}
	return true
}

func (s *Server) leave(engine bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open--
	if engine {
		s.engineOpen--
	}
}

// engineShare is how many connections engine peers may hold together.
func (s *Server) engineShare() int { return max(1, s.limit-max(1, s.limit/8)) }

// refuseFull answers a connection over the cap from the accept loop: one
// refusal line into the fresh socket's empty send buffer, which cannot
// block, then close. The journal gets one entry per burst (burstLog), not
// one per connection.
func (s *Server) refuseFull(c net.Conn, engine bool) {
	r := protocol.Refuse(protocol.CodeTooManyConnections,
		"the controller already serves its cap of %d connections; close one (or raise `serve --max-conns`) and connect again", s.limit)
	if engine {
		r = protocol.Refuse(protocol.CodeTooManyConnections,
			"engine peers already hold their share (%d) of the controller's %d connections; close one and connect again", s.engineShare(), s.limit)
	}
	if line, err := protocol.Line(r.Record("")); err == nil {
		c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		c.Write(line)
	}
	closeNow(c)
	s.refusals.note(protocol.CodeTooManyConnections, r.Message)
}

func (s *Server) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range s.conns {
		k.c.Close()
	}
}

// track registers a connection from accept on, so a shutdown closes it
// even before its hello; the returned func forgets it.
func (s *Server) track(k *conn) func() {
	s.mu.Lock()
	s.conns[k.id] = k
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		delete(s.conns, k.id)
		s.mu.Unlock()
	}
}

// attach hands a connection that said hello to the controller.
func (s *Server) attach(k *conn) func() {
	if s.Controller == nil {
		return func() {}
	}
	s.Controller.attach(k)
	return func() { s.Controller.detach(k) }
}

// handle serves one connection whose peer p was read at accept (perr if
// it could not be) and judged v.
func (s *Server) handle(ctx context.Context, c net.Conn, p *activation.Peer, perr error, v activation.Verdict) {
	k := newConn(newID("k-"), c)
	k.queue = s.queue
	go k.writeLoop()
	defer func() {
		k.close()
		k.flush()
		k.releaseQueue()
		closeGracefully(c)
	}()
	defer s.track(k)()
	if ctx.Err() != nil {
		return // closeAll ran before track
	}
	if perr != nil {
		s.refuse(k, "", protocol.Wrap(protocol.CodePeerUID, perr, "the peer's credentials cannot be read"))
		return
	}
	defer p.Close()
	k.peer = &audit.Peer{UID: p.UID, PID: p.PID}
	k.ident, k.judge, k.engine, k.why = p, s.judge, v.Engine, v.Reason
	s.Audit.Log(audit.Entry{Event: audit.Connect, Connection: k.id, Peer: k.peer,
		Message: fmt.Sprintf("connection %s from uid %d pid %d", k.id, p.UID, p.PID),
		Fields:  map[string]string{"ENGINE_PEER": fmt.Sprint(v.Engine), "ENGINE_PEER_REASON": v.Reason, "PIDFD": fmt.Sprint(p.Exact())}})
	defer func() {
		s.Audit.Log(audit.Entry{Event: audit.Disconnect, Connection: k.id, Peer: k.peer,
			Message: fmt.Sprintf("connection %s closed", k.id)})
	}()
	if p.UID != s.UID {
		s.refuse(k, "", protocol.Refuse(protocol.CodePeerUID,
			"peer uid %d is not the conversation owner's uid %d; only the owner may connect", p.UID, s.UID))
		return
	}
	max := s.MaxLine
	if max <= 0 {
		max = protocol.MaxLine
	}
	hr := &helloReader{c: c, deadline: time.Now().Add(cmp.Or(s.HelloTimeout, DefaultHelloTimeout)),
		idle: cmp.Or(s.IdleTimeout, DefaultIdleTimeout), on: true}
	lines := newLineReader(hr, max, s.lines)
	defer lines.Close()
	ok := s.hello(k, lines)
	s.Started.answered()
	if !ok {
		return
	}
	hr.on = false
	c.SetReadDeadline(time.Time{})
	if !s.awaitStart(ctx, k) {
		return
	}
	defer s.attach(k)()
	for ctx.Err() == nil {
		line, err := lines.Next()
		if err != nil {
			s.readFailed(k, err)
			return
		}
		s.dispatch(ctx, k, line)
		select {
		case <-k.closing:
			return // dropped as too slow
		default:
		}
	}
}

// helloReader bounds the time before the hello: every read waits at most
// idle for data and never past the hello deadline. After the hello (on
// false) it reads without a deadline.
type helloReader struct {
	c        net.Conn
	deadline time.Time
	idle     time.Duration
	on       bool
}

func (h *helloReader) Read(p []byte) (int, error) {
	if h.on {
		d := time.Now().Add(h.idle)
		if d.After(h.deadline) {
			d = h.deadline
		}
		h.c.SetReadDeadline(d)
	}
	return h.c.Read(p)
}

// hello reads and answers the first line; false means the connection ends.
func (s *Server) hello(k *conn, lines *lineReader) bool {
	line, err := lines.Next()
	if err != nil {
		s.readFailed(k, err)
		return false
	}
	typ, err := protocol.Type(line)
	if err != nil {
		s.refuse(k, "", asRefusal(err))
		return false
	}
	if typ != "hello" {
		s.refuse(k, "", protocol.Refuse(protocol.CodeHelloRequired,
			"the first line must be a hello, e.g. {\"type\":\"hello\"}; got type %s", quoted(typ)))
		return false
	}
	var h protocol.Hello
	if err := protocol.Decode(line, &h); err != nil {
		s.refuse(k, "", asRefusal(err))
		return false
	}
	if h.Protocol > protocol.Version {
		s.refuse(k, "", protocol.Refuse(protocol.CodeProtocolVersion,
			"protocol %d is not supported; this server speaks protocol %d", h.Protocol, protocol.Version))
		return false
	}
	// The connection speaks the protocol its hello named (1 when it named
	// none), so a client built before runs of deltas never receives one.
	speaks := max(h.Protocol, 1)
	k.runs = speaks >= protocol.RunsSince
	w := protocol.Welcome{Record: protocol.RecordWelcome, Conversation: s.Conversation, Connection: k.id,
		Mode: "observer", Server: s.Version, Protocol: speaks, Starting: s.Started.starting()}
	if err := k.send(w); err != nil {
		return false
	}
	k.hello = true
	s.Audit.Log(audit.Entry{Event: audit.Hello, Connection: k.id, Peer: k.peer,
		Message: fmt.Sprintf("connection %s said hello (client %s, protocol %d); mode observer", k.id, quoted(h.Client), speaks),
		Fields:  map[string]string{"CLIENT": clip(h.Client), "MODE": "observer", "ENGINE_PEER": fmt.Sprint(k.enginePeer())}})
	return true
}

// dispatch handles one line after the hello; ctx reaches the command.
func (s *Server) dispatch(ctx context.Context, k *conn, line []byte) {
	typ, err := protocol.Type(line)
	if err != nil {
		s.refuse(k, "", asRefusal(err))
		return
	}
	switch {
	case typ == "hello":
		s.refuse(k, "", protocol.Refuse(protocol.CodeDuplicateHello, "this connection already said hello"))
	case s.Controller != nil:
		s.Controller.command(ctx, k, typ, line)
	default:
		s.refuse(k, "", protocol.Refuse(protocol.CodeUnknownCommand, "unknown record type %s", quoted(typ)))
	}
}

// readFailed ends a connection whose read failed, refusing an over-long
// line first so the client learns why. Anything else (EOF, a reset, a
// shutdown) is an ordinary disconnect.
func (s *Server) readFailed(k *conn, err error) {
	switch {
	case errors.Is(err, protocol.ErrLineTooLong):
		s.refuse(k, "", protocol.Wrap(protocol.CodeLineTooLong, err, "a line exceeded the cap; the connection is closed"))
	case errors.Is(err, errBuffers):
		s.refuse(k, "", protocol.Wrap(protocol.CodeBuffersFull, err,
			"the controller holds its cap of %d bytes of unfinished lines across all connections; this connection is closed: send whole lines and connect again (`serve --max-buffered`)", s.lines.max))
	case !k.hello && errors.Is(err, os.ErrDeadlineExceeded):
		r := protocol.Refuse(protocol.CodeHelloTimeout, "no complete hello in time (%s in all, %s without a byte); the connection is closed",
			cmp.Or(s.HelloTimeout, DefaultHelloTimeout), cmp.Or(s.IdleTimeout, DefaultIdleTimeout))
		s.refusals.note(r.Code, r.Message)
		k.send(r.Record(""))
	}
}

// refuse sends and audits a refusal.
func (s *Server) refuse(k *conn, request string, r *protocol.Refusal) {
	r = clipRefusal(r)
	s.Audit.Log(audit.Entry{Event: audit.Refusal, Connection: k.id, Peer: k.peer, Refusal: r.Code,
		Message: fmt.Sprintf("refused %s on connection %s: %s", r.Code, k.id, r.Message)})
	k.send(r.Record(request))
}

// drainLimit bounds what closeGracefully reads from a closing client.
const drainLimit = 64 << 10

// closeGracefully half-closes c and drains what the client already sent
// before closing it: closing a Unix socket with unread data resets the
// peer, which could then lose the refusal that explains the close.
func closeGracefully(c net.Conn) {
	if uc, ok := c.(*net.UnixConn); ok {
		if uc.CloseWrite() == nil {
			uc.SetReadDeadline(time.Now().Add(time.Second))
			io.Copy(io.Discard, io.LimitReader(uc, drainLimit))
		}
	}
	c.Close()
}

// closeNow closes c from the accept loop without waiting: it half-closes,
// discards what the client already sent without blocking (closing with
// unread data would reset the client before it reads the refusal), then
// closes.
func closeNow(c net.Conn) {
	if uc, ok := c.(*net.UnixConn); ok && uc.CloseWrite() == nil {
		if raw, err := uc.SyscallConn(); err == nil {
			var buf [4096]byte
			raw.Control(func(fd uintptr) {
				for n := 0; n < drainLimit; {
					m, err := unix.Read(int(fd), buf[:]) // the socket is non-blocking
					if m <= 0 || err != nil {
						return
					}
					n += m
				}
			})
		}
	}
	c.Close()
}
