package activation

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestListen: the development listener is created 0600, replaces a stale
// socket file, and names the path when it cannot listen.
func TestListen(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "c.sock")
	for i := range 2 { // the second finds the first's socket file and replaces it
		l, err := Listen(p)
		if err != nil {
			t.Fatalf("Listen #%d: %v", i, err)
		}
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm() != 0o600 || fi.Mode()&os.ModeSocket == 0 {
			t.Fatalf("Listen #%d made %v, %v; want a 0600 socket", i, fi.Mode(), err)
		}
		l.(*net.UnixListener).SetUnlinkOnClose(false)
		c, err := net.Dial("unix", p)
		if err != nil {
			t.Fatalf("dial #%d: %v", i, err)
		}
		c.Close()
		l.Close()
	}
	bad := filepath.Join(dir, "missing", "c.sock")
	if _, err := Listen(bad); err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("Listen in a missing directory = %v, want an error naming %s", err, bad)
	}
}

// TestNotify: outside systemd nothing is sent and false is reported; with
// NOTIFY_SOCKET set, the state reaches that socket.
func TestNotify(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	if sent, err := Notify("READY=1"); sent || err != nil {
		t.Fatalf("Notify without NOTIFY_SOCKET = %v, %v; want false, nil", sent, err)
	}
	p := filepath.Join(t.TempDir(), "notify")
	pc, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: p, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	t.Setenv("NOTIFY_SOCKET", p)
	if sent, err := Notify("READY=1"); !sent || err != nil {
		t.Fatalf("Notify = %v, %v; want true, nil", sent, err)
	}
	buf := make([]byte, 64)
	pc.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := pc.Read(buf)
	if err != nil || string(buf[:n]) != "READY=1" {
		t.Fatalf("the manager read %q, %v; want READY=1", buf[:n], err)
	}
}

// listenerChildEnv makes the test binary run listenerChild instead of the
// tests: socket activation passes fds to a process that checks LISTEN_PID
// is its own pid, which only the child can set.
const listenerChildEnv = "MOSAIC_ACTIVATION_LISTENER_CHILD"

func TestMain(m *testing.M) {
	if names, ok := os.LookupEnv(listenerChildEnv); ok {
		listenerChild(names)
		return
	}
	if os.Getenv(hiddenHolderEnv) == "1" {
		hiddenHolder()
		return
	}
	os.Exit(m.Run())
}

// listenerChild receives its fds from 3 on, named by names, and prints
// what Listener made of them and which LISTEN_* variables remain.
func listenerChild(names string) {
	n := 0
	if names != "" {
		n = strings.Count(names, ":") + 1
	}
	os.Setenv("LISTEN_PID", strconv.Itoa(os.Getpid()))
	os.Setenv("LISTEN_FDS", strconv.Itoa(n))
	os.Setenv("LISTEN_FDNAMES", names)
	l, err := Listener()
	var left []string
	for _, k := range []string{"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"} {
		if _, ok := os.LookupEnv(k); ok {
			left = append(left, k)
		}
	}
	switch {
	case err != nil:
		fmt.Printf("err noListener=%t left=%q: %v\n", errors.Is(err, ErrNoListener), left, err)
	default:
		fmt.Printf("ok %s left=%q\n", l.Addr(), left)
		l.Close()
	}
}

// TestListener: exactly one activated stream socket named FDName is
// served; none, several, a misnamed one or a socket that does not listen
// is refused with ErrNoListener; the LISTEN_* variables are unset either
// way, so they never reach the engine.
func TestListener(t *testing.T) {
	dir := t.TempDir()
	seq := 0
	listener := func(t *testing.T) (*os.File, string) {
		seq++
		p := filepath.Join(dir, fmt.Sprintf("l%d.sock", seq))
		l, err := net.ListenUnix("unix", &net.UnixAddr{Name: p, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		f, err := l.File()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f, p
	}
	// socket makes an unbound, unlistening socket of typ.
	socket := func(typ int) func(*testing.T) (*os.File, string) {
		return func(t *testing.T) (*os.File, string) {
			fd, err := syscall.Socket(syscall.AF_UNIX, typ, 0)
			if err != nil {
				t.Fatal(err)
			}
			f := os.NewFile(uintptr(fd), "socket")
			t.Cleanup(func() { f.Close() })
			return f, ""
		}
	}
	datagram, unbound := socket(syscall.SOCK_DGRAM), socket(syscall.SOCK_STREAM)
	regular := func(t *testing.T) (*os.File, string) {
		f, err := os.Create(filepath.Join(dir, "file"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f, ""
	}
	for _, tc := range []struct {
		name  string
		names []string
		fds   []func(*testing.T) (*os.File, string)
		want  string // "ok" serves the first fd; otherwise a substring of the refusal
	}{
		{"one named control", []string{FDName}, []func(*testing.T) (*os.File, string){listener}, "ok"},
		{"none", nil, nil, "start the conversation"},
		{"misnamed", []string{"other"}, []func(*testing.T) (*os.File, string){listener}, "not named"},
		{"two", []string{FDName, FDName}, []func(*testing.T) (*os.File, string){listener, listener}, "want exactly one"},
		{"datagram", []string{FDName}, []func(*testing.T) (*os.File, string){datagram}, "not SOCK_STREAM"},
		{"not a socket", []string{FDName}, []func(*testing.T) (*os.File, string){regular}, "not a socket"},
		{"stream, not listening", []string{FDName}, []func(*testing.T) (*os.File, string){unbound}, "not listening"},
		{"a listener and a file", []string{FDName, "x"}, []func(*testing.T) (*os.File, string){listener, regular}, "want exactly one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(os.Environ(), listenerChildEnv+"="+strings.Join(tc.names, ":"))
			var first string
			for i, mk := range tc.fds {
				f, p := mk(t)
				if i == 0 {
					first = p
				}
				cmd.ExtraFiles = append(cmd.ExtraFiles, f)
			}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
			got := strings.TrimSpace(string(out))
			if !strings.HasSuffix(got, "left=[]") && !strings.Contains(got, "left=[]:") {
				t.Errorf("LISTEN_* variables survived: %s", got)
			}
			if tc.want == "ok" {
				if !strings.HasPrefix(got, "ok "+first+" ") {
					t.Fatalf("child said %q; want it to serve %s", got, first)
				}
				return
			}
			if !strings.HasPrefix(got, "err noListener=true") || !strings.Contains(got, tc.want) {
				t.Fatalf("child said %q; want ErrNoListener with %q", got, tc.want)
			}
		})
	}
}
