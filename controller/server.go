package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/mosaic-agents/mosaic/activation"
	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/protocol"
)

// writeTimeout bounds one write to a client.
const writeTimeout = 10 * time.Second

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

	mu    sync.Mutex
	conns map[string]*conn
	wg    sync.WaitGroup
}

// Serve accepts connections on l until ctx is done or l fails. It returns
// nil after a shutdown through ctx, once every connection has ended.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	s.mu.Lock()
	s.conns = map[string]*conn{}
	s.mu.Unlock()
	stop := context.AfterFunc(ctx, func() { l.Close(); s.closeAll() })
	defer stop()
	defer s.wg.Wait()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("accept on conversation socket: %w", err)
			}
			// A transient failure (EMFILE, ECONNABORTED) must not end the
			// controller: back off briefly and keep serving.
			time.Sleep(50 * time.Millisecond)
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.handle(ctx, c)
		}()
	}
}

func (s *Server) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range s.conns {
		k.c.Close()
	}
}

func (s *Server) track(k *conn) func() {
	s.mu.Lock()
	s.conns[k.id] = k
	s.mu.Unlock()
	if s.Controller != nil {
		s.Controller.attach(k)
	}
	return func() {
		if s.Controller != nil {
			s.Controller.detach(k)
		}
		s.mu.Lock()
		delete(s.conns, k.id)
		s.mu.Unlock()
	}
}

func (s *Server) handle(ctx context.Context, c net.Conn) {
	k := newConn(newID("k-"), c)
	go k.writeLoop()
	defer func() {
		k.close()
		k.flush()
		closeGracefully(c)
	}()
	cred, err := activation.PeerCred(c)
	if err != nil {
		s.refuse(k, "", protocol.Wrap(protocol.CodePeerUID, err, "the peer's credentials cannot be read"))
		return
	}
	k.peer = &audit.Peer{UID: cred.UID, PID: cred.PID}
	k.enginePeer = inEngineScope(cred.PID)
	s.Audit.Log(audit.Entry{Event: audit.Connect, Connection: k.id, Peer: k.peer,
		Message: fmt.Sprintf("connection %s from uid %d pid %d", k.id, cred.UID, cred.PID)})
	defer func() {
		s.Audit.Log(audit.Entry{Event: audit.Disconnect, Connection: k.id, Peer: k.peer,
			Message: fmt.Sprintf("connection %s closed", k.id)})
	}()
	if cred.UID != s.UID {
		s.refuse(k, "", protocol.Refuse(protocol.CodePeerUID,
			"peer uid %d is not the conversation owner's uid %d; only the owner may connect", cred.UID, s.UID))
		return
	}
	max := s.MaxLine
	if max <= 0 {
		max = protocol.MaxLine
	}
	lines := protocol.NewLineReader(c, max)
	if !s.hello(k, lines) {
		return
	}
	defer s.track(k)()
	for ctx.Err() == nil {
		line, err := lines.Next()
		if err != nil {
			s.readFailed(k, err)
			return
		}
		s.dispatch(k, line)
		select {
		case <-k.closing:
			return // dropped as too slow
		default:
		}
	}
}

// hello reads and answers the first line; false means the connection ends.
func (s *Server) hello(k *conn, lines *protocol.LineReader) bool {
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
			"the first line must be a hello, e.g. {\"type\":\"hello\"}; got type %q", typ))
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
	w := protocol.Welcome{Record: "welcome", Conversation: s.Conversation, Connection: k.id,
		Mode: "observer", Server: s.Version, Protocol: protocol.Version}
	if err := k.send(w); err != nil {
		return false
	}
	k.hello = true
	s.Audit.Log(audit.Entry{Event: audit.Hello, Connection: k.id, Peer: k.peer,
		Message: fmt.Sprintf("connection %s said hello (client %q, protocol %d); mode observer", k.id, h.Client, h.Protocol),
		Fields:  map[string]string{"CLIENT": h.Client, "MODE": "observer", "ENGINE_PEER": fmt.Sprint(k.enginePeer)}})
	return true
}

// dispatch handles one line after the hello.
func (s *Server) dispatch(k *conn, line []byte) {
	typ, err := protocol.Type(line)
	if err != nil {
		s.refuse(k, "", asRefusal(err))
		return
	}
	switch {
	case typ == "hello":
		s.refuse(k, "", protocol.Refuse(protocol.CodeDuplicateHello, "this connection already said hello"))
	case s.Controller != nil:
		s.Controller.command(k, typ, line)
	default:
		s.refuse(k, "", protocol.Refuse(protocol.CodeUnknownCommand, "unknown record type %q", typ))
	}
}

// readFailed ends a connection whose read failed, refusing an over-long
// line first so the client learns why. Anything else (EOF, a reset, a
// shutdown) is an ordinary disconnect.
func (s *Server) readFailed(k *conn, err error) {
	if errors.Is(err, protocol.ErrLineTooLong) {
		s.refuse(k, "", protocol.Wrap(protocol.CodeLineTooLong, err, "a line exceeded the cap; the connection is closed"))
	}
}

// refuse sends and audits a refusal.
func (s *Server) refuse(k *conn, request string, r *protocol.Refusal) {
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
