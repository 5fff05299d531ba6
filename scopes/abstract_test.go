package scopes

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/proofs"
)

// unixEnv, set, makes the test binary try a Unix socket or a signal
// instead of running tests (tryUnixIfAsked): "connect:ADDR" connects to
// ADDR (a path, or @NAME in the abstract namespace); "own:@NAME" listens
// on @NAME and connects to itself; "signal:main" and "signal:threads"
// send signal 0 to PID 1's main thread, or to each of its other threads
// (a held child's threads other than the one the engine is forked from
// are outside the engine's Landlock domain). It exits 0 when it got
// through, 1 otherwise.
const unixEnv = "MOSAIC_TEST_UNIX"

// abstractProbes prints "escape abstract-outside N" for a connection to
// the test's own abstract socket (%[2]s, bound outside the engine) and
// "escape abstract-own N" for a socket the probe binds itself (no escape:
// it must get through everywhere); 0 is through.
const abstractProbes = `bin=%[1]s
try() { n=$1; shift; if "$@" </dev/null >/dev/null 2>&1; then echo "$n 0"; else echo "$n 1"; fi; }
try "escape abstract-outside" env ` + unixEnv + `=connect:@%[2]s "$bin"
try "escape abstract-own" env ` + unixEnv + `=own:@%[2]s-own-$$ "$bin"
try "escape signal-main" env ` + unixEnv + `=signal:main "$bin"
try "escape signal-threads" env ` + unixEnv + `=signal:threads "$bin"
`

// TestConfinedToolCannotReachAbstractSockets: a tool of a confined engine
// cannot connect to an abstract Unix socket bound outside the cohort (an
// X11 display, a session bus at unix:abstract=), which share the network
// namespace with it, while outside the engine the same attempt gets
// through; a tool's own abstract socket still works. The proof records
// the scopes.
func TestConfinedToolCannotReachAbstractSockets(t *testing.T) {
	m := testManager(t)
	name := "mosaic-test-abstract-" + strconv.Itoa(os.Getpid())
	accepted := serveUnix(t, "@"+name)
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	probes := fmt.Sprintf(abstractProbes, shellQuote(bin), name)
	out, err := exec.Command("sh", "-c", probes).Output()
	if err != nil {
		t.Fatalf("the probes outside the engine: %v", err)
	}
	outside := escapeLines(string(out))
	// (Outside, PID 1 is the sandbox's systemd: no signal of the user's
	// reaches it, so the signal attempts are controlled inside.)
	if outside["abstract-outside"] != "0" || outside["abstract-own"] != "0" {
		sandboxtest.Unavailable(t, "outside the engine the probes did not get through (%v): the attempts inside would prove nothing", outside)
	}
	before := accepted.Load()
	e := launchEngine(t, m, `echo "engine $$"
`+probes+`echo "ready 1"; exec cat`)
	c := e.Cohort.Confinement
	if !c.Confined {
		t.Fatalf("engine not confined: %s", c.Reason)
	}
	if len(c.Scoped) == 0 {
		sandboxtest.Unavailable(t, "the engine's domain has no scopes: %s", c.Unscoped)
	}
	if !slices.Equal(c.Scoped, proofs.Scopes) {
		t.Fatalf("scoped %v, want %v", c.Scoped, proofs.Scopes)
	}
	got := e.expect(t, "engine", "ready", "escape abstract-outside", "escape abstract-own", "escape signal-main", "escape signal-threads")
	if got["escape abstract-outside"] != "1" {
		t.Errorf("a tool connected to an abstract socket outside the cohort (%q)", got["escape abstract-outside"])
	}
	if n := accepted.Load(); n != before {
		t.Errorf("the socket outside accepted %d connections from inside", n-before)
	}
	if got["escape signal-main"] != "0" {
		t.Errorf("a tool could not signal the held child's main thread, in its own domain (%q): the attempt on the others proves nothing", got["escape signal-main"])
	}
	if got["escape signal-threads"] != "1" {
		t.Errorf("a tool signalled a thread of the held child outside its domain (%q)", got["escape signal-threads"])
	}
	if got["escape abstract-own"] != "0" {
		t.Errorf("a tool could not use an abstract socket of its own (%q)", got["escape abstract-own"])
	}
}

// tryUnixIfAsked runs the attempt unixEnv names and exits; it returns at
// once when unixEnv is not set.
func tryUnixIfAsked() {
	how, addr, ok := strings.Cut(os.Getenv(unixEnv), ":")
	if !ok {
		return
	}
	var err error
	switch how {
	case "connect":
		err = dialUnix(addr)
	case "own":
		err = ownUnix(addr)
	case "signal":
		err = signalPID1(addr == "main")
	default:
		err = fmt.Errorf("unknown attempt %q", how)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

func dialUnix(addr string) error {
	c, err := net.Dial("unix", addr)
	if err != nil {
		return err
	}
	return c.Close()
}

func ownUnix(addr string) error {
	l, err := net.Listen("unix", addr)
	if err != nil {
		return err
	}
	defer l.Close()
	done := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			c.Close()
		}
		done <- err
	}()
	if err := dialUnix(addr); err != nil {
		return err
	}
	return <-done
}

// signalPID1 sends signal 0 to PID 1's main thread, or to every other
// thread of it; it fails unless every signal got through (and there was
// another thread).
func signalPID1(main bool) error {
	if main {
		return unix.Tgkill(1, 1, 0)
	}
	tasks, err := os.ReadDir("/proc/1/task")
	if err != nil {
		return err
	}
	n := 0
	for _, task := range tasks {
		tid, err := strconv.Atoi(task.Name())
		if err != nil || tid == 1 {
			continue
		}
		if err := unix.Tgkill(1, tid, 0); err != nil {
			return fmt.Errorf("tgkill(1, %d): %w", tid, err)
		}
		n++
	}
	if n == 0 {
		return fmt.Errorf("PID 1 has no thread but its main one")
	}
	return nil
}

// serveUnix listens on addr (a path, or @NAME) until the test ends,
// accepting and closing every connection, and counts them.
func serveUnix(t *testing.T, addr string) *atomic.Int32 {
	t.Helper()
	l, err := net.Listen("unix", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var accepted atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	return &accepted
}
