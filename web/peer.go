package web

import (
	"context"
	"net"
	"net/http"

	"github.com/mosaic-agents/mosaic/protocol"
)

// connKey holds the accepted connection in a request's context, so each
// request can judge the process behind it.
type connKey struct{}

func withConn(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// checkPeer refuses a request whose connection comes from an engine (the
// agent's tools) or from a process that cannot be vouched for: the peer
// of the Unix socket by SO_PEERCRED and its pidfd, that of a loopback TCP
// connection by every process holding its other end
// (activation.Judge.JudgeConn). It runs on every request, reads included
// (a transcript is the user's), and again at each heartbeat of a stream,
// since a connection's holders can change while it stays open. A cookie
// read from the browser's profile on disk gets an engine nowhere.
func (s *Server) checkPeer(r *http.Request) error {
	c, _ := r.Context().Value(connKey{}).(net.Conn)
	if c == nil {
		return protocol.Refuse(protocol.CodeWebPeer, "the server cannot tell which process sent this request; connect to the web socket or loopback port directly")
	}
	if v := s.judge.JudgeConn(c); v.Engine {
		return protocol.Refuse(protocol.CodeWebPeer, "this connection is refused: %s. The web surface serves only your own processes outside every engine (the agent may not use it): open it from your browser, or from a reverse proxy on the Unix socket (docs/web.md)", v.Reason)
	}
	return nil
}

// peerGone judges a stream's connection again and, if its peer is now
// refused (the socket was passed to another process), ends the stream
// with the refusal. The page does not retry a final "gone".
func (s *Server) peerGone(e *sse, r *http.Request) bool {
	err := s.checkPeer(r)
	if err == nil {
		return false
	}
	s.logf("stream %s: %v", r.URL.Path, err)
	e.send("gone", map[string]any{"message": err.Error(), "final": true})
	e.flush()
	return true
}
