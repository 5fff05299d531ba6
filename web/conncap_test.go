package web_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"
)

// TestWebConnectionsBounded: what a process refused on every request (an
// engine's tool: web-peer; here a wrong Host stands for it) can hold of
// the server. A refused request closes its connection, and connections
// that send nothing are held at most 32 at a time per cgroup their
// sockets were made in; the rest are closed at accept, and a place comes
// back when one closes.
func TestWebConnectionsBounded(t *testing.T) {
	s := startServer(t, noConversations)
	addr := s.base[len("http://"):]
	dial := func(t *testing.T) net.Conn {
		t.Helper()
		c, err := net.Dial("tcp4", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// closedByServer says whether the server has closed c (a read ends
	// with EOF or a reset) rather than waiting on it.
	closedByServer := func(c net.Conn) bool {
		c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		_, err := io.Copy(io.Discard, c)
		var ne net.Error
		return !(errors.As(err, &ne) && ne.Timeout())
	}

	t.Run("a refused request closes its connection", func(t *testing.T) {
		for i := range 20 {
			c := dial(t)
			req, _ := http.NewRequest("GET", s.base+"/", nil)
			req.Host = "evil.example:7433"
			if err := req.Write(c); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusMisdirectedRequest || !resp.Close {
				t.Fatalf("request %d: HTTP %d, Connection: close %v; want 421 and the connection closed", i, resp.StatusCode, resp.Close)
			}
			if !closedByServer(c) {
				t.Fatalf("request %d: the server holds the connection of a refused request", i)
			}
		}
	})

	t.Run("connections that send nothing, bounded per cgroup", func(t *testing.T) {
		fds := func() int { e, _ := os.ReadDir("/proc/self/fd"); return len(e) }
		before := fds()
		var conns []net.Conn
		for range 64 {
			conns = append(conns, dial(t))
		}
		held := 0
		for _, c := range conns {
			if !closedByServer(c) {
				held++
			}
		}
		if held != 32 {
			t.Fatalf("the server holds %d of 64 silent connections from one cgroup, want 32", held)
		}
		t.Logf("64 silent connections: %d held, the process's descriptors +%d (64 of them the test's own)", held, fds()-before)
		for _, c := range conns {
			c.Close()
		}
		// The places come back: a request on a new connection is answered.
		deadline := time.Now().Add(5 * time.Second)
		for {
			resp, err := http.Get(s.base + "/")
			if err == nil {
				resp.Body.Close()
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after the silent connections closed, a request still gets no answer: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}
