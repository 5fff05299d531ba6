package web_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"net/http"
	"os/exec"
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

// TestWebUnixPeer: on the Unix socket (a reverse proxy's way in) the peer
// is judged by SO_PEERCRED and its pidfd: this process, outside every
// engine, is served; a client in a user namespace of its own (where a
// confined engine runs its tools) is refused web-peer.
func TestWebUnixPeer(t *testing.T) {
	o := noConversations
	o.Store = &web.Store{Dir: t.TempDir() + "/web"}
	o.Hosts = []string{"proxy.example"}
	srv, err := web.New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	sock := t.TempDir() + "/web.sock"
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.Serve(ctx, l); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	r, err := c.Get("http://proxy.example/")
	if err != nil {
		t.Fatal(err)
	}
	if got := refusal(t, r); got != protocol.CodeWebAuth {
		t.Fatalf("a request on the Unix socket from this process: refused %q, want %q (judged, then asked for a session)", got, protocol.CodeWebAuth)
	}
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("no curl for the client in another user namespace")
	}
	out, err := exec.Command("unshare", "--user", curl, "-s", "--unix-socket", sock, "http://proxy.example/").CombinedOutput()
	if err != nil {
		t.Skipf("unshare --user curl: %v: %s", err, out)
	}
	if !strings.Contains(string(out), `"code":"`+protocol.CodeWebPeer+`"`) {
		t.Fatalf("a client in another user namespace on the Unix socket got %s, want %s", out, protocol.CodeWebPeer)
	}
}
