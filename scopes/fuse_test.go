package scopes

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
)

// fuseServeEnv, set, makes the test binary a FUSE server mounted on the
// directory it names (serveFUSEIfAsked): a tool of a test engine runs it.
const fuseServeEnv = "MOSAIC_TEST_FUSE_SERVE"

// fuseEngine: a tool makes its own user and mount namespace (unshare -Urm,
// root there, as any tool of an unconfined engine can: a confined one finds
// /dev/fuse masked, TestConfinedToolCannotReachFUSE), serves a FUSE
// filesystem from the test binary (%[1]s) in it and, once the mount
// answers, starts a reader of the file whose read the server never
// answers. The server prints "blocked 1" when that read reaches it, so
// the reader is asleep in the kernel's wait for the answer.
const fuseEngine = `echo "engine $$"
unshare -Urm sh -c '
echo "tool $$"
d=$(mktemp -d) || { echo "fuse-error mktemp failed"; exit 1; }
` + fuseServeEnv + `="$d" "$0" </dev/null &
s=$!
echo "server $s"
until [ -e "$d/ready" ]; do
	kill -0 $s 2>/dev/null || { echo "fuse-error the server exited"; exit 1; }
	sleep 0.02
done
cat "$d/hang" </dev/null >/dev/null &
echo "reader $!"
wait' %[1]s </dev/null 2>&1 &
echo "ready 1"; exec cat`

// TestKillPhaseKillsAFUSEReader runs the kill phase, on the real kernel,
// against a cohort the freezer cannot freeze: a tool serves a FUSE
// filesystem and a second tool reads a file of it that the server never
// answers. The read sleeps killable in the kernel (request_wait_answer),
// where the freeze never reaches it, so the engine cgroup does not report
// frozen 1 and the stop cannot enumerate the cohort: it ends uncertain,
// having written cgroup.kill anyway (killUnfrozen). SIGKILL kills the
// frozen server, whose death aborts the connection and so ends the read,
// and the reader dies; the next stop finds the cgroup empty. If a kernel
// froze the reader after all, the first stop would enumerate and observe
// the cohort's end itself.
//
// The engine runs unconfined (Config.NoConfinement), the only way a tool
// gets FUSE since the confinement masks /dev/fuse, so no stop of it ends
// stopped: what the test asserts of each observation is that it would
// have proven the cohort's end but for the confinement (the empty cgroup,
// the membership complete, every member's death seen), and that nothing
// of the cohort lives on.
func TestKillPhaseKillsAFUSEReader(t *testing.T) {
	testManager(t)
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("no FUSE on this machine: %v", err)
	}
	m := NewManager(Config{NoConfinement: true})
	t.Cleanup(m.Close)
	fs, err := m.cgroupFS()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	e := launchEngine(t, m, fmt.Sprintf(fuseEngine, shellQuote(bin)))
	if c := e.Cohort.Confinement; c.Confined || !strings.Contains(c.Reason, "turned off") {
		t.Fatalf("cohort confinement %+v, want unconfined with the reason", c)
	}
	got := e.expectFUSE(t, "engine", "tool", "server", "reader", "blocked", "ready")
	pins := map[string]pinned{}
	for _, name := range []string{"engine", "tool", "server", "reader"} {
		pins[name] = e.pin(t, got[name])
	}
	// What the kernel does during the kill phase, for the log: the engine
	// cgroup's frozen, and where the server and the reader sleep.
	w := watchFreeze(fs, e.Cohort.Cgroup, pins["server"], pins["reader"])
	res := e.Kill(ctxT(t), StopOptions{Stop: "stop-fuse", KillTimeout: 2 * time.Second})
	seen := w.stop()
	t.Logf("during the kill phase: %s", strings.Join(seen, "; "))
	t.Logf("first stop: %s (%s); notes %q", res.Outcome, res.Reason, res.Notes)
	if !strings.Contains(res.Reason, errNotFrozen.Error()) {
		// The kernel froze the reader: the kill phase enumerated it.
		assertEndedUnconfined(t, res, pins["engine"], pins["tool"], pins["server"], pins["reader"])
		return
	}
	if res.Outcome != Uncertain {
		t.Fatalf("outcome %s (%s), want uncertain", res.Outcome, res.Reason)
	}
	if !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.Contains(n, "cgroup.kill written without the freeze") }) {
		t.Fatalf("notes %q: cgroup.kill was not written to the cohort that never froze", res.Notes)
	}
	for _, p := range pins {
		p.waitDead(t)
	}
	// Nothing was enumerated, so this stop observes the emptied cgroup
	// without naming the members.
	res = e.Kill(ctxT(t), StopOptions{Stop: "stop-fuse-again", KillTimeout: 2 * time.Second})
	assertEndedUnconfined(t, res)
}

// expectFUSE is expect, ending the test when the tool says FUSE could not
// be served: skipped here, failed under CI=true.
func (e *engine) expectFUSE(t *testing.T, prefixes ...string) map[string]string {
	t.Helper()
	got := map[string]string{}
	for len(got) < len(prefixes) {
		l := e.line(t)
		if why, ok := strings.CutPrefix(l, "fuse-error "); ok {
			sandboxtest.Unavailable(t, "a tool of the confined engine could not serve FUSE: %s", why)
		}
		for _, p := range prefixes {
			if v, ok := strings.CutPrefix(l, p+" "); ok {
				got[p] = v
			}
		}
	}
	return got
}

// freezeWatch samples, until stopped, the engine cgroup's frozen and the
// state and wait channel of the server and the reader, keeping each
// distinct sample once, in order.
type freezeWatch struct {
	done chan struct{}
	wg   sync.WaitGroup
	seen []string
}

func watchFreeze(fs *cgroupFS, cg string, server, reader pinned) *freezeWatch {
	w := &freezeWatch{done: make(chan struct{})}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		for {
			s := "frozen " + frozenOf(fs, cg) + ", server " + sleepOf(server.pid) + ", reader " + sleepOf(reader.pid)
			if len(w.seen) == 0 || w.seen[len(w.seen)-1] != s {
				w.seen = append(w.seen, s)
			}
			select {
			case <-w.done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return w
}

func (w *freezeWatch) stop() []string {
	close(w.done)
	w.wg.Wait()
	return w.seen
}

func frozenOf(fs *cgroupFS, cg string) string {
	ev, err := fs.events(cg)
	if err != nil {
		return "?"
	}
	return fmt.Sprint(ev.Frozen)
}

// sleepOf is a process's state letter and wait channel ("gone" once it
// was reaped).
func sleepOf(pid int) string {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "gone"
	}
	_, after, _ := strings.Cut(string(st), ") ")
	state, _, _ := strings.Cut(after, " ")
	wchan, _ := os.ReadFile(fmt.Sprintf("/proc/%d/wchan", pid))
	return state + " " + string(wchan)
}

// shellQuote quotes s as one word for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// serveFUSEIfAsked serves fuseFS on the directory fuseServeEnv names and
// never returns, when it is set; otherwise it returns at once. It mounts
// with mount(2) itself (DirectMountStrict): the tool is root in its own
// user namespace, and fusermount, setuid, would gain nothing under the
// engine's no_new_privs.
func serveFUSEIfAsked() {
	dir := os.Getenv(fuseServeEnv)
	if dir == "" {
		return
	}
	srv, err := fuse.NewServer(&fuseFS{RawFileSystem: fuse.NewDefaultRawFileSystem()}, dir,
		&fuse.MountOptions{Name: "mosaictest", DirectMountStrict: true})
	if err != nil {
		fmt.Printf("fuse-error mount: %v\n", err)
		os.Exit(1)
	}
	srv.Serve()
	os.Exit(0)
}

// fuseFS is a root directory with two files: "ready", to see the mount
// answer, and "hang", whose reads are never answered.
type fuseFS struct {
	fuse.RawFileSystem
	once sync.Once
}

const (
	fuseReady = 2
	fuseHang  = 3
)

var fuseNames = map[string]uint64{"ready": fuseReady, "hang": fuseHang}

func fuseAttr(ino uint64, a *fuse.Attr) {
	a.Ino, a.Nlink, a.Owner = ino, 1, fuse.Owner{Uid: uint32(os.Getuid()), Gid: uint32(os.Getgid())}
	if ino == fuse.FUSE_ROOT_ID {
		a.Mode = fuse.S_IFDIR | 0o555
		return
	}
	a.Mode, a.Size = fuse.S_IFREG|0o444, 4096
}

func (f *fuseFS) Lookup(_ <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	ino, ok := fuseNames[name]
	if h.NodeId != fuse.FUSE_ROOT_ID || !ok {
		return fuse.ENOENT
	}
	out.NodeId = ino
	fuseAttr(ino, &out.Attr)
	return fuse.OK
}

func (f *fuseFS) GetAttr(_ <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	fuseAttr(in.NodeId, &out.Attr)
	return fuse.OK
}

func (f *fuseFS) Open(_ <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	// Direct I/O: each read(2) is one READ request, no page cache.
	out.OpenFlags = fuse.FOPEN_DIRECT_IO
	return fuse.OK
}

// Read never answers a read of "hang", not even the INTERRUPT the kernel
// sends when the reader is signalled (the freeze is one): the reader waits
// for the server's answer or the connection's end.
func (f *fuseFS) Read(_ <-chan struct{}, in *fuse.ReadIn, _ []byte) (fuse.ReadResult, fuse.Status) {
	if in.NodeId != fuseHang {
		return fuse.ReadResultData(nil), fuse.OK
	}
	f.once.Do(func() { fmt.Println("blocked 1") })
	select {}
}
