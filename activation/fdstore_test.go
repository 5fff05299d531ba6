package activation

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestStoreKeepsNonBlocking: a file handed to the fd store reaches the
// manager as a descriptor and stays non-blocking here. The engine's
// stdin is stored so: in blocking mode (what f.Fd() leaves a file in) a
// Close could no longer wake a write stuck on an engine that stopped
// reading, and no write deadline would hold.
func TestStoreKeepsNonBlocking(t *testing.T) {
	addr := filepath.Join(t.TempDir(), "notify")
	mgr, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(mgr) })
	if err := unix.Bind(mgr, &unix.SockaddrUnix{Name: addr}); err != nil {
		t.Fatal(err)
	}
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
