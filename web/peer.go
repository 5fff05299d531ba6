package web

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/mosaic-agents/mosaic/activation"
	"github.com/mosaic-agents/mosaic/protocol"
)

// connKey holds the accepted connection in a request's context, so each
// request can judge the process behind it.
type connKey struct{}

func withConn(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// maxJudging bounds the judgements that run at once. A TCP judgement reads
// every descriptor of every process the server can read, and an engine
// chooses how many it holds (200,000 make one judgement take over a
// second): without a bound, a burst of requests would take every core.
const maxJudging = 4

// judgeWait is how long a request waits for its turn to be judged before
// it is refused (web-busy): failing closed, since serving it unjudged is
// not an option, and a browser retries a refused stream.
const judgeWait = 10 * time.Second

// checkPeer refuses a request whose connection comes from an engine (the
// agent's tools) or from a process that cannot be vouched for: the peer
// of the Unix socket by SO_PEERCRED and its pidfd, that of a loopback TCP
// connection by every process holding its other end
// (activation.Judge.JudgeConn). It runs on every request, reads included
// (a transcript is the user's), and again at each heartbeat of a stream,
// since a connection's holders can change while it stays open. A cookie
// read from the browser's profile on disk gets an engine nowhere.
//
// No verdict is cached, not even per connection between heartbeats: a
// verdict is true of the moment it was made, and a socket handed to an
// engine (SCM_RIGHTS) carries no sign of it; a cached verdict would let
// the engine's requests through unjudged until it expired. The cost is
// bounded instead (maxJudging).
//
// wait bounds the wait for a turn; 0 waits as long as the request lives
// (a stream's heartbeat: the stream sends nothing meanwhile).
func (s *Server) checkPeer(r *http.Request, wait time.Duration) error {
	c, _ := r.Context().Value(connKey{}).(net.Conn)
	if c == nil {
		return protocol.Refuse(protocol.CodeWebPeer, "the server cannot tell which process sent this request; connect to the web socket or loopback port directly")
	}
	// What the peer's socket decides alone (made inside an engine scope,
	// or in a cgroup no look places, held by no process, another uid's)
	// is refused before it queues for a turn: a tool flooding the server
	// with requests, each judged slowly, would otherwise hold every turn
	// and keep the user's own requests waiting until they are refused
	// web-busy.
	if v, decided := s.judge.JudgeSocket(c); decided {
		return peerRefusal(v)
	}
	release, err := s.turn(r.Context(), wait)
	if err != nil {
		return err
	}
	v := s.judge.JudgeConn(c)
	release()
	if v.Engine {
		return peerRefusal(v)
	}
	return nil
}

// peerRefusal is the refusal of an engine's (or an unvouched) peer.
func peerRefusal(v activation.Verdict) error {
	return protocol.Refuse(protocol.CodeWebPeer, "this connection is refused: %s. The web surface serves only your own processes outside every engine (the agent may not use it): open it from your browser, or from a reverse proxy on the Unix socket (docs/web.md)", v.Reason)
}

// turn takes one of the maxJudging places, waiting up to wait (0: as long
// as ctx lives). A free place is taken first: a select between it and a
// context already done (the client closed its end before the request was
// read) picks either at random, and would refuse web-busy a request no
// judgement was holding up, instead of judging it.
func (s *Server) turn(ctx context.Context, wait time.Duration) (release func(), err error) {
	release = func() { <-s.judging }
	select {
	case s.judging <- struct{}{}:
		return release, nil
	default:
	}
	if wait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, wait)
		defer cancel()
	}
	select {
	case s.judging <- struct{}{}:
		return release, nil
	case <-ctx.Done():
		return nil, protocol.Refuse(protocol.CodeWebBusy, "the server is busy judging other connections (%d at once) and this request waited %s for its turn; retry, and if it persists look for a process that opens many connections or holds very many descriptors", maxJudging, wait)
	}
}

// peerGone judges a stream's connection again and, if its peer is now
// refused (the socket was passed to another process), ends the stream
// with the refusal. The page does not retry a final "gone".
func (s *Server) peerGone(e *sse, r *http.Request) bool {
	err := s.checkPeer(r, 0)
	if err == nil {
		return false
	}
	s.logf("stream %s: %v", clip(r.URL.Path, maxLoggedPath), err)
	e.send("gone", map[string]any{"message": err.Error(), "final": true})
	e.flush()
	return true
}

// peerStatus is the HTTP status of a checkPeer refusal: 503 for web-busy
// (retry later), 403 otherwise.
func peerStatus(err error) int {
	var ref *protocol.Refusal
	if errors.As(err, &ref) && ref.Code == protocol.CodeWebBusy {
		return http.StatusServiceUnavailable
	}
	return http.StatusForbidden
}
