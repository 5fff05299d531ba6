package activation

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestStoreKeepsNonBlocking: a file handed to the fd store reaches the
// manager as a descriptor and stays non-blocking here. The engine's
// stdin is stored so: in blocking mode (what f.Fd() leaves a file in) a
// Close could no longer wake a write stuck on an engine that stopped
// reading, and no write deadline would hold.
func TestStoreKeepsNonBlocking(t *testing.T) {
	addr, mgr := notifySocket(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	if err := (&FDStore{addr: addr}).Store("e-1.stdin", w); err != nil {
		t.Fatal(err)
	}
	buf, oob := make([]byte, 256), make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := unix.Recvmsg(mgr, buf, oob, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(buf[:n]), "FDNAME=e-1.stdin") {
		t.Fatalf("the manager got %q", buf[:n])
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		t.Fatalf("control messages %v, %v; want one with the descriptor", msgs, err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		t.Fatalf("descriptors %v, %v; want one", fds, err)
	}
	unix.Close(fds[0])
	rc, err := w.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var flags int
	if err := rc.Control(func(fd uintptr) { flags, err = unix.FcntlInt(fd, unix.F_GETFL, 0) }); err != nil || flags&unix.O_NONBLOCK == 0 {
		t.Fatalf("the stored file is in blocking mode (flags %#x, %v)", flags, err)
	}
}

// TestBarrier: Barrier sends BARRIER=1 with a pipe's write end and
// returns once the manager closes it (it processed what came before), or
// says the manager did not answer when the context ends first.
func TestBarrier(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer bool
	}{
		{"answered", true},
		{"not answered", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, mgr := notifySocket(t)
			got := make(chan int, 1)
			go func() {
				buf, oob := make([]byte, 64), make([]byte, unix.CmsgSpace(4))
				n, oobn, _, _, err := unix.Recvmsg(mgr, buf, oob, 0)
				if err != nil || string(buf[:n]) != "BARRIER=1" {
					got <- -1
					return
				}
				msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
				if len(msgs) != 1 {
					got <- -1
					return
				}
				fds, _ := unix.ParseUnixRights(&msgs[0])
				if len(fds) != 1 {
					got <- -1
					return
				}
				got <- fds[0]
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- (&FDStore{addr: addr}).Barrier(ctx) }()
			fd := <-got
			if fd < 0 {
				t.Fatal("the manager got no BARRIER=1 with one descriptor")
			}
			if tc.answer {
				unix.Close(fd)
			} else {
				t.Cleanup(func() { unix.Close(fd) })
			}
			err := <-done
			if tc.answer && err != nil {
				t.Fatalf("Barrier after the manager closed the pipe: %v", err)
			}
			if !tc.answer && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Barrier with no answer: %v; want the deadline", err)
			}
		})
	}
}

// notifySocket is a datagram socket standing for the manager's
// NOTIFY_SOCKET: its address and descriptor.
func notifySocket(t *testing.T) (string, int) {
	t.Helper()
	addr := filepath.Join(t.TempDir(), "notify")
	mgr, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(mgr) })
	if err := unix.Bind(mgr, &unix.SockaddrUnix{Name: addr}); err != nil {
		t.Fatal(err)
	}
	return addr, mgr
}
