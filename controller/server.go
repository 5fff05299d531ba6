package controller

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
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

// Server serves one conversation's socket.
type Server struct {
	Conversation string
	Version      string // the server version named in welcome
	UID          int    // the only peer uid admitted
	MaxLine      int    // cap on one client line; 0 means protocol.MaxLine
	Audit        *audit.Logger

	mu    sync.Mutex
	conns map[string]net.Conn
	wg    sync.WaitGroup
}

// Serve accepts connections on l until ctx is done or l fails. It returns
// nil after a shutdown through ctx, once every connection has ended.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	s.mu.Lock()
	s.conns = map[string]net.Conn{}
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
	for _, c := range s.conns {
		c.Close()
	}
}

func (s *Server) track(id string, c net.Conn) func() {
	s.mu.Lock()
	s.conns[id] = c
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		delete(s.conns, id)
		s.mu.Unlock()
	}
}

// conn is one client connection.
type conn struct {
	id   string
	c    net.Conn
	peer *audit.Peer
	wmu  sync.Mutex
}

func (k *conn) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode record for connection %s: %w", k.id, err)
	}
	k.wmu.Lock()
	defer k.wmu.Unlock()
	k.c.SetWriteDeadline(time.Now().Add(writeTimeout))
	_, err = k.c.Write(append(b, '\n'))
	return err
}

func (s *Server) handle(ctx context.Context, c net.Conn) {
	defer closeGracefully(c)
	k := &conn{id: newConnectionID(), c: c}
	defer s.track(k.id, c)()
	cred, err := activation.PeerCred(c)
	if err != nil {
		s.refuse(k, "", protocol.Wrap(protocol.CodePeerUID, err, "the peer's credentials cannot be read"))
		return
	}
	k.peer = &audit.Peer{UID: cred.UID, PID: cred.PID}
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
	for ctx.Err() == nil {
		line, err := lines.Next()
		if err != nil {
			s.readFailed(k, err)
			return
		}
		if err := s.dispatch(k, line); err != nil {
			return
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
	s.Audit.Log(audit.Entry{Event: audit.Hello, Connection: k.id, Peer: k.peer,
		Message: fmt.Sprintf("connection %s said hello (client %q, protocol %d); mode observer", k.id, h.Client, h.Protocol),
		Fields:  map[string]string{"CLIENT": h.Client, "MODE": "observer"}})
	return true
}

// dispatch handles one line after the hello. An error ends the connection.
func (s *Server) dispatch(k *conn, line []byte) error {
	typ, err := protocol.Type(line)
	if err != nil {
		return s.refuse(k, "", asRefusal(err))
	}
	switch typ {
	case "hello":
		return s.refuse(k, "", protocol.Refuse(protocol.CodeDuplicateHello, "this connection already said hello"))
	default:
		return s.refuse(k, "", protocol.Refuse(protocol.CodeUnknownCommand, "unknown record type %q", typ))
	}
}

// readFailed ends a connection whose read failed, refusing an over-long
// line first so the client learns why.
func (s *Server) readFailed(k *conn, err error) {
	if errors.Is(err, protocol.ErrLineTooLong) {
		s.refuse(k, "", protocol.Wrap(protocol.CodeLineTooLong, err, "a line exceeded the cap; the connection is closed"))
	}
	// Anything else (EOF, a reset, a shutdown) is an ordinary disconnect.
}

// refuse sends and audits a refusal. Its error is the write's: a refusal
// the client cannot receive ends the connection.
func (s *Server) refuse(k *conn, request string, r *protocol.Refusal) error {
	s.Audit.Log(audit.Entry{Event: audit.Refusal, Connection: k.id, Peer: k.peer, Refusal: r.Code,
		Message: fmt.Sprintf("refused %s on connection %s: %s", r.Code, k.id, r.Message)})
	return k.send(r.Record(request))
}

func asRefusal(err error) *protocol.Refusal {
	var r *protocol.Refusal
	if errors.As(err, &r) {
		return r
	}
	return protocol.Wrap(protocol.CodeMalformed, err, "%v", err)
}

func newConnectionID() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err)) // never fails on Linux ≥ 3.17
	}
	return "k-" + hex.EncodeToString(b[:])
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
