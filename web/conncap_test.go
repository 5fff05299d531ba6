package web_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
)

// TestWebConnectionsBounded: what a process refused on every request (an
// engine's tool) can hold of the server. A refused request closes its
// connection (here a wrong Host stands for the engine's web-peer), and
// connections whose sockets were made inside one engine scope, sending
// nothing, are held at most 32 at a time; the rest are closed at their
// first read. A process outside every engine scope, the user's browser
// (which any page it shows can drive), is held to no such bound.
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
	closedByServer := func(c net.Conn, wait time.Duration) bool {
		c.SetReadDeadline(time.Now().Add(wait))
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
			if !closedByServer(c, 300*time.Millisecond) {
				t.Fatalf("request %d: the server holds the connection of a refused request", i)
			}
		}
	})

	t.Run("silent connections from outside every engine, not bounded", func(t *testing.T) {
		var conns []net.Conn
		for range 64 {
			conns = append(conns, dial(t))
		}
		// The server reads each at once; one it closed reads EOF at once
		// too. All within the 10 s header timeout.
		time.Sleep(500 * time.Millisecond)
		for i, c := range conns {
			if closedByServer(c, 20*time.Millisecond) {
				t.Fatalf("the server closed silent connection %d of 64 from this process, outside every engine scope", i)
			}
		}
	})

	t.Run("silent connections from inside an engine scope, bounded", func(t *testing.T) {
		sandboxtest.Require(t)
		out := filepath.Join(t.TempDir(), "held")
		if err := os.Chmod(filepath.Dir(out), 0o777); err != nil {
			t.Fatal(err)
		}
		// 64 connections, spread over sub-cgroups would count the same;
		// each waits for what the server does, then says whether it is
		// still open (read -t times out: 142) or closed (EOF: 1).
		port := addr[strings.LastIndexByte(addr, ':')+1:]
		sandboxtest.Scope(t, fmt.Sprintf("mosaic-engine-conncap-%d", os.Getpid()), nil, fmt.Sprintf(`
fds=()
for i in $(seq 64); do exec {fd}<>/dev/tcp/127.0.0.1/%s; fds+=($fd); done
sleep 1
held=0
for fd in "${fds[@]}"; do read -t 0.2 -u $fd _; [ $? -gt 128 ] && held=$((held+1)); done
echo $held > %s.tmp && mv %s.tmp %s
sleep 60`, port, out, out, out))
		deadline := time.Now().Add(30 * time.Second)
		for {
			b, err := os.ReadFile(out)
			if err == nil {
				if held := strings.TrimSpace(string(b)); held != "32" {
					t.Fatalf("the server holds %s of 64 silent connections made inside one engine scope, want 32", held)
				}
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("the engine scope's script never said how many connections the server holds")
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
}
