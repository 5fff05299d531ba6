package scopes

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/internal/procfs"
	"github.com/mosaic-agents/mosaic/proofs"
	"golang.org/x/sys/unix"
)

// escapeEngine tries, from inside the engine, every way out of the cohort
// that issue 10 found plus the ones confinement must also close. Each
// attempt prints "escape NAME 0" when it got through and anything else
// when it failed; the sleeps 1001-1003 are what an escape would leave
// running outside. %[1]s is the user manager's app.slice in the cgroup2
// mount, %[2]d a same-uid process outside (the test), %[3]s the runtime
// directory, %[4]s the directory of the user's tmux server socket, %[5]s
// a pseudo-terminal of the user's (the test holds its master), %[6]s the
// user's X display's file-system socket, %[7]s a POSIX shared-memory
// object of the user's.
const escapeEngine = `rt=%[3]s
try() { n=$1; shift; if "$@" </dev/null >/dev/null 2>&1; then echo "escape $n 0"; else echo "escape $n 1"; fi; }
echo "engine $$"
# 1. a service of the user manager
try systemd-run timeout 20 systemd-run --user --collect --unit=mosaic-escape-1002-$$ sleep 1002
# 2. a scope of the user manager around a process it starts
( timeout 20 systemd-run --user --scope sh -c 'echo "escape systemd-run-scope 0"; exec sleep 1003' </dev/null 2>/dev/null || echo "escape systemd-run-scope 1" ) &
scopetry=$!
# 3. a move into a new cgroup the user owns, outside the scope
sh -c 'if mkdir "$1" && echo $$ > "$1/cgroup.procs"; then echo "escape cgroup-move 0"; else echo "escape cgroup-move 1"; fi; exec sleep 1001' _ "%[1]s/evil-$$.scope" </dev/null 2>/dev/null &
# 4. the masked sockets, directly and through an outside process's root
try bus-socket test -S "$rt/bus"
try user-bus timeout 10 busctl --user status
try system-bus timeout 10 busctl --system status
try manager-socket test -S "$rt/systemd/private"
try journal-socket test -S /run/systemd/journal/socket
try proc-outside-root test -S "/proc/%[2]d/root$rt/bus"
try proc-outside-environ cat "/proc/%[2]d/environ"
try proc-1-root test -S "/proc/1/root$rt/bus"
try tmux-socket test -S "%[4]s/default"
try notify-socket test -S /run/systemd/notify
try x11-socket test -S "%[6]s"
try user-shm test -e "%[7]s"
if echo x > /dev/shm/own-$$ && test -s /dev/shm/own-$$; then echo "ownshm 0"; else echo "ownshm 1"; fi
# the user's terminal: whatever reaches it shows on the test's master (a
# pty of the engine's own may have the same name)
( printf mosaic-pty-escape > "%[5]s" ) 2>/dev/null
if script -qc 'tty' /dev/null </dev/null 2>/dev/null | grep -q '^/dev/pts/'; then echo "ownpty 0"; else echo "ownpty 1"; fi
if command -v tmux >/dev/null; then
  if tmux -S "%[4]s/own" new-session -d 'exec sleep 300' </dev/null >/dev/null 2>&1 && tmux -S "%[4]s/own" has-session </dev/null >/dev/null 2>&1; then echo "owntmux 0"; else echo "owntmux 1"; fi
else echo "owntmux none"; fi
# 5. a nested user and mount namespace, root inside, undoing the masks
try umount-direct umount "$rt/systemd"
try nested-userns unshare -Urm true
try umount-mask unshare -Urm sh -c "umount '$rt/systemd' 2>/dev/null || umount -l '$rt/systemd' 2>/dev/null || umount /proc 2>/dev/null; test -S '$rt/systemd/private' || test -S '/proc/%[2]d/root$rt/bus'"
setsid sh -c 'echo "setsid $$"; exec sleep 300' </dev/null &
# reaped before ready: the test pins every descendant then, and one
# exiting on its own after that would be no member of the stop
wait $scopetry
echo "ready 1"; exec cat`

var escapes = []string{"systemd-run", "systemd-run-scope", "cgroup-move", "bus-socket", "user-bus", "system-bus", "manager-socket", "journal-socket",
	"proc-outside-root", "proc-outside-environ", "proc-1-root", "tmux-socket", "notify-socket", "x11-socket", "user-shm", "umount-direct", "umount-mask"}

// TestConfinedEngineCannotEscape (issue 10, K13): a confined engine's tool
// children cannot start a process outside the cohort (systemd-run --user,
// with or without --scope), cannot move themselves out through cgroupfs,
// cannot reach the masked sockets directly, through another process's
// /proc/<pid>/root or from a nested user namespace; the stop that follows
// is proven and nothing the engine started lives on anywhere.
func TestConfinedEngineCannotEscape(t *testing.T) {
	m := testManager(t)
	fs, err := m.cgroupFS()
	if err != nil {
		t.Fatal(err)
	}
	own, err := procfs.Cgroup2(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// The test runs as a service in the user manager's app.slice: an
	// escapee would make its cgroup beside it.
	appSlice := filepath.Join(fs.mount, path.Dir(own))
	rt := os.Getenv("XDG_RUNTIME_DIR")
	if rt == "" {
		rt = "/run/user/" + strconv.Itoa(os.Getuid())
	}
	t.Cleanup(func() { killEscapees(t) })
	// The user's tmux server, listening before the launch: a tool that
	// reached it would have it start a process outside the cohort.
	tmuxTmp := t.TempDir()
	t.Setenv("TMUX_TMPDIR", tmuxTmp)
	tmux := filepath.Join(tmuxTmp, "tmux-"+strconv.Itoa(os.Getuid()))
	if err := os.Mkdir(tmux, 0o700); err != nil {
		t.Fatal(err)
	}
	server, err := net.Listen("unix", filepath.Join(tmux, "default"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close() })
	// PID 1's notification socket, which every process may write to.
	if fi, err := os.Stat("/run/systemd/notify"); err != nil || fi.Mode().Type() != os.ModeSocket {
		t.Fatalf("no /run/systemd/notify socket outside (%v, %v): the mask would prove nothing", fi, err)
	}
	// A terminal of the user's: a tool that reached it would write to it.
	ptmx, pts := openPTY(t)
	// The user's X display, listening on its file-system socket.
	x11 := listenDisplay(t)
	// Shared memory of the user's, as an editor or a sound server keeps.
	shm := fmt.Sprintf("/dev/shm/mosaic-escape-%d", os.Getpid())
	if err := os.WriteFile(shm, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(shm) })
	e := launchEngine(t, m, fmt.Sprintf(escapeEngine, appSlice, os.Getpid(), rt, tmux, pts, x11, shm))
	want := append([]string{"engine", "setsid", "ready"}, escapes...)
	prefixes := []string{"engine", "setsid", "ready", "escape nested-userns", "owntmux", "ownpty", "ownshm"}
	for _, n := range escapes {
		prefixes = append(prefixes, "escape "+n)
	}
	got := e.expect(t, prefixes...)
	if len(got) < len(want) {
		t.Fatalf("lines %v", got)
	}
	// The user's tmux is out of reach, a tool's own still works (its
	// server in the cohort, its socket in the engine's private tmpfs).
	if got["owntmux"] != "0" && got["owntmux"] != "none" {
		t.Errorf("a tool could not run a tmux server of its own (%q)", got["owntmux"])
	}
	if got["ownshm"] != "0" {
		t.Errorf("a tool could not share memory of its own in /dev/shm (%q)", got["ownshm"])
	}
	if got["ownpty"] != "0" {
		t.Errorf("a tool could not open a pseudo-terminal of its own (%q)", got["ownpty"])
	}
	ptmx.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	if b, _ := io.ReadAll(ptmx); strings.Contains(string(b), "mosaic-pty-escape") {
		t.Errorf("a tool wrote to the user's terminal %s: %q", pts, b)
	}
	if got["escape nested-userns"] != "0" {
		t.Fatalf("the engine could not make a nested user namespace (%q): the umount attempt proves nothing", got["escape nested-userns"])
	}
	for _, n := range escapes {
		if got["escape "+n] == "0" {
			t.Errorf("escape %s got through", n)
		}
	}
	if c := e.Cohort.Confinement; !c.Confined {
		t.Fatalf("engine not confined: %s", c.Reason)
	}
	// Every descendant of the held child, from the whole process list.
	tree := descendants(t, e.Cohort.PID)
	var pins []pinned
	for _, pid := range tree {
		if p, ok := tryPin(pid); ok {
			pins = append(pins, p)
		}
	}
	if len(pins) < 4 {
		t.Fatalf("only %d descendants of the engine found (%v): the process list is not being read", len(pins), tree)
	}
	eng, child := e.pin(t, got["engine"]), e.pin(t, got["setsid"])
	res := e.Stop(ctxT(t), StopOptions{Stop: "stop-escape", Grace: time.Second})
	assertProvenStop(t, res, append(pins, eng, child)...)
	requireProof(t, res)
	if ok, why := res.Observation.Confinement.Holds(res.Observation.Cgroup); !ok {
		t.Fatalf("observation's confinement: %s", why)
	}
	// systemd-run's unit would start asynchronously: give an escapee the
	// time to show up before reading the whole process list.
	time.Sleep(500 * time.Millisecond)
	if left := escapees(t); len(left) > 0 {
		t.Fatalf("processes an escape started live on after a stopped stop: %v", left)
	}
}

// TestUnconfinedNeverStopped: an engine launched without confinement is
// killed like any other, but its stop ends uncertain with the reason, and
// no proof is built from it.
func TestUnconfinedNeverStopped(t *testing.T) {
	testManager(t)
	m := NewManager(Config{NoConfinement: true})
	t.Cleanup(m.Close)
	e := launchEngine(t, m, setsidEngine)
	if c := e.Cohort.Confinement; c.Confined || !strings.Contains(c.Reason, "turned off") {
		t.Fatalf("cohort confinement %+v, want unconfined with the reason", c)
	}
	got := e.expect(t, "engine", "setsid", "ready")
	eng, child := e.pin(t, got["engine"]), e.pin(t, got["setsid"])
	res := e.Stop(ctxT(t), StopOptions{Stop: "stop-unconfined", Grace: time.Second})
	if res.Outcome != Uncertain || !strings.Contains(res.Reason, "unconfined") {
		t.Fatalf("outcome %s (%s), want uncertain: unconfined", res.Outcome, res.Reason)
	}
	eng.waitDead(t)
	child.waitDead(t)
	if _, err := proofsFor(res); err == nil {
		t.Fatal("a proof was built from an unconfined engine's stop")
	}
}

func proofsFor(res StopResult) (*proofs.CohortProof, error) {
	return proofs.NewCohortProof(res.Observation)
}

// procs lists every process this test can see: pid, parent pid, argv.
type procEntry struct {
	pid, ppid int
	argv      string
}

func processList(t *testing.T) []procEntry {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []procEntry
	for _, d := range ents {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		st, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		_, after, ok := strings.Cut(string(st), ") ")
		f := strings.Fields(after)
		if !ok || len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		cmd, _ := os.ReadFile("/proc/" + d.Name() + "/cmdline")
		out = append(out, procEntry{pid, ppid, strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " "))})
	}
	return out
}

// descendants returns every process below root in the whole process list.
func descendants(t *testing.T, root int) []int {
	t.Helper()
	ps := processList(t)
	in := map[int]bool{root: true}
	for changed := true; changed; {
		changed = false
		for _, p := range ps {
			if in[p.ppid] && !in[p.pid] {
				in[p.pid], changed = true, true
			}
		}
	}
	var out []int
	for pid := range in {
		out = append(out, pid)
	}
	return out
}

// escapees are the sleeps an escape would have started, wherever they run.
func escapees(t *testing.T) []procEntry {
	var out []procEntry
	for _, p := range processList(t) {
		for _, s := range []string{"sleep 1001", "sleep 1002", "sleep 1003"} {
			if strings.HasSuffix(p.argv, s) {
				out = append(out, p)
			}
		}
	}
	return out
}

// killEscapees kills what an escape left (on a build without confinement).
func killEscapees(t *testing.T) {
	for _, p := range escapees(t) {
		if q, ok := tryPin(p.pid); ok {
			q.kill()
		}
	}
}

func tryPin(pid int) (pinned, bool) {
	fd, err := pidfdOpen(pid)
	if err != nil {
		return pinned{}, false
	}
	return pinned{pid, fd}, true
}

// openPTY opens a pseudo-terminal in the user's devpts instance, as a
// terminal window does, and returns its master (non-blocking, so a read
// deadline holds) and the path of its slave.
func openPTY(t *testing.T) (*os.File, string) {
	t.Helper()
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open /dev/ptmx: %v", err)
	}
	master := os.NewFile(uintptr(fd), "ptmx")
	t.Cleanup(func() { master.Close() })
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlock the pty: %v", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("the pty's number: %v", err)
	}
	return master, "/dev/pts/" + strconv.Itoa(n)
}

// listenDisplay listens on an X display's file-system socket in
// /tmp/.X11-unix (made if missing, 1777 as X servers make it), as Xorg
// and Xwayland do beside the abstract one, and returns its path.
func listenDisplay(t *testing.T) string {
	t.Helper()
	const dir = "/tmp/.X11-unix"
	if err := os.Mkdir(dir, 0o1777); err == nil {
		os.Chmod(dir, 0o1777)
		t.Cleanup(func() { os.Remove(dir) })
	} else if !errors.Is(err, fs.ErrExist) {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "X"+strconv.Itoa(70+os.Getpid()%20))
	os.Remove(p)
	l, err := net.Listen("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return p
}
