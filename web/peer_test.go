package web_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/web"
)

// logLines collects the server's log.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Write(b []byte) (int, error) {
	l.mu.Lock()
	l.lines = append(l.lines, string(b))
	l.mu.Unlock()
	return len(b), nil
}

func (l *logLines) has(s string) bool { return l.count(s) > 0 }

func (l *logLines) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, x := range l.lines {
		if strings.Contains(x, s) {
			n++
		}
	}
	return n
}

// TestWebPeerGone: a request whose sender let go of its connection before
// the server read it — a tool that writes a replayed cookie and exits, or
// hands its socket on — is answered by no one the server can vouch for,
// so it is refused web-peer and changes nothing, even with the session's
// cookie, the right Host and Origin and the CSRF token. On a server that
// does not judge its TCP peers, it logs the session out.
func TestWebPeerGone(t *testing.T) {
	var logs logLines
	o := noConversations
	o.Log = log.New(&logs, "", 0)
	srv, l, s := newServer(t, o)
	tok, err := s.store.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	ss, cookie, err := s.store.Redeem(tok, "test", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	host := l.Addr().String()
	c, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "POST /logout HTTP/1.1\r\nHost: %s\r\nOrigin: http://%s\r\nCookie: %s=%s\r\n%s: %s\r\nContent-Length: 0\r\n\r\n",
		host, host, web.CookieName, cookie, web.CSRFHeader, ss.CSRF)
	c.Close()
	// Only now does the server accept and read it.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.Serve(ctx, l); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := s.store.Check(cookie); err != nil {
			t.Fatalf("a request no process holds any more logged the session out: %v", err)
		}
		if logs.has("refused POST /logout: " + protocol.CodeWebPeer) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the request was neither refused %s nor acted on; log:\n%s", protocol.CodeWebPeer, strings.Join(logs.lines, ""))
		}
	}
	// The session still works for a process that holds its connection.
	cl := browser(t)
	csrf := s.login(t, cl)
	if csrf == "" {
		t.Fatal("no CSRF token after a fresh login")
	}
	t.Logf("refused: %s", strings.Join(logs.lines, ""))
}
