package activation

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"golang.org/x/sys/unix"
)

// loopbackPair returns both ends of a loopback TCP connection made by this
// process to a listener on network's loopback address.
func loopbackPair(tb testing.TB, network, addr string) (client, server net.Conn) {
	tb.Helper()
	l, err := net.Listen(network, addr)
	if err != nil {
		tb.Skipf("no %s loopback: %v", network, err)
	}
	defer l.Close()
	client, err = net.Dial(network, l.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { client.Close() })
	server, err = l.Accept()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { server.Close() })
	return client, server
}

// TestJudgeTCPOutside: a connection this process made (an operator's
// process outside every engine) is vouched for over IPv4 and IPv6; one
// whose maker closed it after sending is not (no process holds it).
func TestJudgeTCPOutside(t *testing.T) {
	j, err := NewJudge()
	if err != nil {
		t.Fatal(err)
	}
	if v := j.Judge(mustSelf(t)); v.Engine {
		t.Skipf("this test process is itself judged an engine peer here: %s", v.Reason)
	}
	for _, c := range []struct{ network, addr string }{{"tcp4", "127.0.0.1:0"}, {"tcp6", "[::1]:0"}} {
		t.Run(c.network, func(t *testing.T) {
			client, server := loopbackPair(t, c.network, c.addr)
			if v := j.JudgeConn(server); v.Engine {
				t.Fatalf("this process's own connection was refused: %s", v.Reason)
			}
			client.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
			client.Close()
			v := j.JudgeConn(server)
			if !v.Engine {
				t.Fatal("a connection no process holds any more was vouched for")
			}
			t.Logf("after close: %s", v.Reason)
		})
	}
}

func mustSelf(t *testing.T) *Peer {
	t.Helper()
	p, err := ProcessPeer(os.Getpid())
	if err != nil {
		t.Skipf("no pidfd_open: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// TestJudgeTCPEngineHolder (sandbox): a connection held by a process in a
// real mosaic-engine-*.scope of the user manager is refused, and so is
// one this process made and shares with such a process (it inherited the
// socket): every holder must pass, not the first found.
func TestJudgeTCPEngineHolder(t *testing.T) {
	sandboxtest.Require(t)
	j, err := NewJudge()
	if err != nil {
		t.Fatal(err)
	}
	waitScope := func(name string) {
		t.Helper()
		for i := 0; i < 200; i++ {
			if out, _ := exec.Command("systemctl", "--user", "is-active", name+".scope").Output(); strings.TrimSpace(string(out)) == "active" {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("scope %s never became active", name)
	}

	t.Run("held inside an engine scope", func(t *testing.T) {
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		name := fmt.Sprintf("mosaic-engine-tcpjudge-%d", os.Getpid())
		port := l.Addr().(*net.TCPAddr).Port
		sandboxtest.Scope(t, name, nil, fmt.Sprintf(`exec 3<>/dev/tcp/127.0.0.1/%d; printf 'x' >&3; sleep 60`, port))
		server, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer server.Close()
		buf := make([]byte, 1)
		server.Read(buf) // the script connected and wrote: it is in the scope
		v := j.JudgeConn(server)
		if !v.Engine || !strings.Contains(v.Reason, name) {
			t.Fatalf("a connection held inside %s: %+v, want an engine verdict naming the scope", name, v)
		}
		t.Logf("refused: %s", v.Reason)
		// Where the socket was made says as much alone, again from the
		// last look.
		for range 2 {
			if v, decided := j.JudgeSocket(server); !decided || !v.Engine || !strings.Contains(v.Reason, name) {
				t.Fatalf("JudgeSocket of a socket made inside %s: %+v, %v; want an engine verdict naming the scope", name, v, decided)
			}
		}
	})

	t.Run("shared with a process inside an engine scope", func(t *testing.T) {
		client, server := loopbackPair(t, "tcp4", "127.0.0.1:0")
		f, err := client.(*net.TCPConn).File()
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		name := fmt.Sprintf("mosaic-engine-tcpshare-%d", os.Getpid())
		sandboxtest.Scope(t, name, nil, `sleep 60`, f)
		waitScope(name)
		v := j.JudgeConn(server)
		if !v.Engine || !strings.Contains(v.Reason, name) {
			t.Fatalf("a connection this process shares with %s: %+v, want an engine verdict naming the scope", name, v)
		}
		t.Logf("refused: %s", v.Reason)
		// Made outside: only the full judgement finds the engine holder.
		if v, decided := j.JudgeSocket(server); decided {
			t.Fatalf("JudgeSocket of a socket this process made: %+v, want it left to JudgeConn", v)
		}
	})
}

// hiddenHolderEnv makes the test binary run hiddenHolder instead of the
// tests.
const hiddenHolderEnv = "MOSAIC_ACTIVATION_HIDDEN_HOLDER"

// hiddenHolder makes itself non-dumpable (its descriptors can no longer
// be read by a process of the same uid), says so, and holds fd 3 until
// stdin closes.
func hiddenHolder() {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		fmt.Println("prctl:", err)
		return
	}
	fmt.Println("hidden")
	io.Copy(io.Discard, os.Stdin)
}

// TestJudgeTCPHiddenHolder (sandbox): a socket made under the user
// manager and now held only by a process whose descriptors the server
// cannot read (a tool of an unconfined engine that left its scope and made
// itself non-dumpable would look like that) is refused: nobody the server
// can vouch for holds it.
func TestJudgeTCPHiddenHolder(t *testing.T) {
	sandboxtest.Require(t)
	j, err := NewJudge()
	if err != nil {
		t.Fatal(err)
	}
	client, server := loopbackPair(t, "tcp4", "127.0.0.1:0")
	f, err := client.(*net.TCPConn).File()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), hiddenHolderEnv+"=1")
	cmd.ExtraFiles = []*os.File{f}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); cmd.Wait() })
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "hidden\n" {
		t.Fatalf("the holder did not hide: %q", line)
	}
	// Only the hidden child holds the socket now.
	f.Close()
	client.Close()
	v := j.JudgeConn(server)
	if !v.Engine || !strings.Contains(v.Reason, "no process the server can read holds") {
		t.Fatalf("a socket held only by a process the server cannot read: %+v, want refused for that", v)
	}
	t.Logf("refused: %s", v.Reason)
}

// BenchmarkJudgeTCP measures one TCP peer judgement: the table lookup,
// the scan of every readable process's descriptors, and the judge.
func BenchmarkJudgeTCP(b *testing.B) {
	j, err := NewJudge()
	if err != nil {
		b.Fatal(err)
	}
	_, server := loopbackPair(b, "tcp4", "127.0.0.1:0")
	for b.Loop() {
		if v := j.JudgeConn(server); v.Engine {
			b.Fatal(v.Reason)
		}
	}
}

func TestInManager(t *testing.T) {
	for _, c := range []struct {
		cg   string
		want bool
	}{
		{"/user.slice/user-1000.slice/user@1000.service/app.slice/app-firefox.scope", true},
		{"/user.slice/user-1000.slice/user@1000.service/app.slice/mosaic-engine-pi-1-e-2.scope/engine", true},
		{"/user.slice/user-1000.slice/session-4.scope", false},
		{"/user.slice/user-1000.slice/user@1001.service/app.slice/x.scope", false},
		{"/user.slice/user-1000.slice/xuser@1000.service/app.slice", false},
		{"/", false},
	} {
		if got := inManager(c.cg, 1000); got != c.want {
			t.Errorf("inManager(%q) = %v, want %v", c.cg, got, c.want)
		}
	}
}

// TestDiagRefusesAListenerInThePeersPlace: a peer that reset its
// connection is gone, whoever listens on the address and port it was
// bound to. The kernel's exact lookup, finding no connected socket,
// answers with a listener there: bound beside it with SO_REUSEPORT
// before, or after the reset. That listener is never taken for the
// peer.
func TestDiagRefusesAListenerInThePeersPlace(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before bool // the listener shares the port (SO_REUSEPORT) before the reset
	}{
		{"listener after the reset", false},
		{"listener beside it with SO_REUSEPORT", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, err := net.Listen("tcp4", "127.0.0.1:0")
			if err != nil {
				t.Skipf("no IPv4 loopback: %v", err)
			}
			defer srv.Close()
			reuse := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
				var serr error
				if err := c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1) }); err != nil {
					return err
				}
				return serr
			}}
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}, Control: reuse.Control}
			client, err := d.Dial("tcp4", srv.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			server, err := srv.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer server.Close()
			bound := client.LocalAddr().String()
			var squatter net.Listener
			if tc.before {
				if squatter, err = reuse.Listen(context.Background(), "tcp4", bound); err != nil {
					t.Fatal(err)
				}
			}
			client.(*net.TCPConn).SetLinger(0)
			client.Close() // a reset: nothing of the connection is left
			if !tc.before {
				if squatter, err = net.Listen("tcp4", bound); err != nil {
					t.Fatal(err)
				}
			}
			defer squatter.Close()
			sock, err := diagTCP(addrPort(server.RemoteAddr().(*net.TCPAddr)), addrPort(server.LocalAddr().(*net.TCPAddr)))
			if !errors.Is(err, ErrPeerUnreadable) {
				t.Fatalf("the peer's socket is gone, a listener holds %s: diag %+v, %v; want %v", bound, sock, err, ErrPeerUnreadable)
			}
		})
	}
}

// TestDiagFindsADualStackPeer: an IPv6 socket connected to an IPv4
// listener through its v4-mapped address (Java's and .NET's default
// sockets) is the peer asked about, though the kernel answers it as IPv6.
func TestDiagFindsADualStackPeer(t *testing.T) {
	srv, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Skipf("no IPv4 loopback: %v", err)
	}
	defer srv.Close()
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no IPv6 sockets: %v", err)
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 0); err != nil {
		t.Fatal(err)
	}
	to := &unix.SockaddrInet6{Port: srv.Addr().(*net.TCPAddr).Port, Addr: [16]byte{10: 0xff, 11: 0xff, 12: 127, 15: 1}}
	if err := unix.Connect(fd, to); err != nil {
		t.Skipf("no dual-stack connect: %v", err)
	}
	server, err := srv.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	sock, err := diagTCP(addrPort(server.RemoteAddr().(*net.TCPAddr)), addrPort(server.LocalAddr().(*net.TCPAddr)))
	if err != nil || sock.inode == 0 {
		t.Fatalf("the dual-stack peer's socket: %+v, %v; want it found", sock, err)
	}
}
