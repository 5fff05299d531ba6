package scopes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/internal/devices"
)

// Ways around the confinement through a second mount, the launcher's
// terminal and the kernel's namespace limits (helper 129's review). Each
// test that needs its own mount namespace or limit re-runs this binary
// inside `unshare` with an environment variable naming the set-up.

// TestPTYsAndShmThroughAnotherDev: with /dev bound at a second place (a
// chroot's /dev, bound for a build), the user's ptys and shared memory
// are not reachable there either: the engine's own replace them at /dev,
// and the second place is masked.
func TestPTYsAndShmThroughAnotherDev(t *testing.T) {
	sandboxtest.Require(t)
	dir := withDevBound(t, "TestPTYsAndShmThroughAnotherDev")
	if dir == "" {
		return
	}
	ptmx, pts := openPTY(t)
	shm := fmt.Sprintf("/dev/shm/mosaic-reach-%d", os.Getpid())
	if err := os.WriteFile(shm, []byte("user-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(shm) })
	alt := dir + "/pts/" + strings.TrimPrefix(pts, "/dev/pts/")
	altShm := dir + "/shm/" + strings.TrimPrefix(shm, "/dev/shm/")
	if b, err := os.ReadFile(altShm); err != nil || string(b) != "user-secret" {
		t.Fatalf("the second mount does not show the shared memory (%q, %v): the test proves nothing", b, err)
	}
	m := testManager(t)
	e := launchEngine(t, m, fmt.Sprintf(`echo "engine $$"
if ( printf mosaic-pty-escape > %[1]q ) 2>/dev/null; then echo "ptywrite 0"; else echo "ptywrite 1"; fi
if grep -q user-secret %[2]q 2>/dev/null; then echo "shmread 0"; else echo "shmread 1"; fi
if ( printf forged > %[2]q ) 2>/dev/null; then echo "shmwrite 0"; else echo "shmwrite 1"; fi
echo "ready 1"; exec cat`, alt, altShm))
	requireConfined(t, e)
	got := e.expect(t, "engine", "ptywrite", "shmread", "shmwrite", "ready")
	ptmx.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	if b, _ := io.ReadAll(ptmx); strings.Contains(string(b), "mosaic-pty-escape") {
		t.Errorf("a tool wrote to the user's terminal %s through %s: %q", pts, alt, b)
	}
	if got["shmread"] == "0" {
		t.Errorf("a tool read the user's shared memory %s through %s", shm, altShm)
	}
	if b, _ := os.ReadFile(shm); string(b) != "user-secret" {
		t.Errorf("a tool wrote the user's shared memory %s through %s: %q", shm, altShm, b)
	}
	e.Stop(ctxT(t), StopOptions{Stop: "stop-reach-dev", Grace: time.Second})
}

// TestReadOnlyThroughAnotherMount: a read-only input (Pi's models.json)
// cannot be rewritten through a second mount of a directory above it.
func TestReadOnlyThroughAnotherMount(t *testing.T) {
	m := testManager(t)
	if _, err := os.Stat(bindHelper); err != nil {
		sandboxtest.Unavailable(t, "no %s in this sandbox: %v", bindHelper, err)
	}
	home := t.TempDir()
	agent := home + "/.pi/agent"
	if err := os.MkdirAll(agent, 0o700); err != nil {
		t.Fatal(err)
	}
	models := agent + "/models.json"
	if err := os.WriteFile(models, []byte("real\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	alias := fmt.Sprintf("/mnt/mosaic-ro-%d", os.Getpid())
	if out, err := exec.Command("sudo", "-n", bindHelper, home, alias).CombinedOutput(); err != nil {
		t.Fatalf("bind %s at %s: %v\n%s", home, alias, err, out)
	}
	t.Cleanup(func() { exec.Command("sudo", "-n", bindHelper, "-u", alias).Run() })
	seen := alias + "/.pi/agent/models.json"
	e := launchWith(t, m, fmt.Sprintf(`echo "engine $$"
if ( echo forged > %[1]q ) 2>/dev/null; then echo "direct 0"; else echo "direct 1"; fi
if ( echo forged > %[2]q ) 2>/dev/null; then echo "alias 0"; else echo "alias 1"; fi
echo "ready 1"; exec cat`, models, seen), func(s *Spec) { s.ReadOnly = []string{agent} })
	requireConfined(t, e)
	got := e.expect(t, "engine", "direct", "alias", "ready")
	if b, _ := os.ReadFile(models); string(b) != "real\n" || got["direct"] == "0" || got["alias"] == "0" {
		t.Errorf("a read-only input was written (at its path: %s, through %s: %s); it now holds %q", got["direct"], seen, got["alias"], b)
	}
	e.Stop(ctxT(t), StopOptions{Stop: "stop-reach-ro", Grace: time.Second})
}

const cttyEnv = "MOSAIC_TEST_CTTY"

// TestNoControllingTerminal: a launcher that has a controlling terminal
// (`mosaicctl serve --listen` run from a shell) does not hand it to the
// engine: /dev/tty opens nothing, so a tool can neither write to that
// terminal nor type into it (TIOCSTI).
func TestNoControllingTerminal(t *testing.T) {
	sandboxtest.Require(t)
	if os.Getenv(cttyEnv) == "" {
		if _, err := exec.LookPath("script"); err != nil {
			sandboxtest.Unavailable(t, "no script(1) to give the test a terminal: %v", err)
		}
		bin, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("script", "-qfec", bin+" -test.run=^TestNoControllingTerminal$ -test.count=1 -test.v", "/dev/null")
		cmd.Env = append(os.Environ(), cttyEnv+"=1")
		out, err := cmd.CombinedOutput()
		t.Logf("under script (a terminal):\n%s", out)
		if err != nil || !strings.Contains(string(out), "--- PASS: TestNoControllingTerminal") || strings.Contains(string(out), "mosaic-ctty-escape") {
			t.Errorf("with a controlling terminal: %v", err)
		}
		return
	}
	if f, err := os.OpenFile("/dev/tty", os.O_RDWR, 0); err != nil {
		t.Fatalf("the launcher has no controlling terminal under script: %v", err)
	} else {
		f.Close()
	}
	m := testManager(t)
	e := launchEngine(t, m, `echo "engine $$"
if ( printf '\nmosaic-ctty-escape\n' > /dev/tty ) 2>/dev/null; then echo "ttywrite 0"; else echo "ttywrite 1"; fi
echo "ready 1"; exec cat`)
	requireConfined(t, e)
	if got := e.expect(t, "engine", "ttywrite", "ready"); got["ttywrite"] == "0" {
		t.Errorf("a tool wrote to the launcher's terminal through /dev/tty")
	}
	e.Stop(ctxT(t), StopOptions{Stop: "stop-reach-tty", Grace: time.Second})
}

const limitEnv = "MOSAIC_TEST_IPC_LIMIT"

// TestUsedUpNamespacesNeverUnconfine: a confined engine's tool holds every
// IPC namespace the user may have (user.max_ipc_namespaces, lowered here
// to 30 in a user namespace of the test's own); a fresh Manager, as a new
// or restarted controller has, then refuses to launch the next engine
// (ErrNamespacesUsedUp), and never launches it unconfined.
func TestUsedUpNamespacesNeverUnconfine(t *testing.T) {
	sandboxtest.Require(t)
	if os.Getenv(limitEnv) == "" {
		bin, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("unshare", "-Ur", "sh", "-c", `echo 30 > /proc/sys/user/max_ipc_namespaces && exec unshare --map-user=$1 --map-group=$2 "$0" -test.run='^TestUsedUpNamespacesNeverUnconfine$' -test.count=1 -test.v`,
			bin, fmt.Sprint(os.Getuid()), fmt.Sprint(os.Getgid()))
		cmd.Env = append(os.Environ(), limitEnv+"=1")
		out, err := cmd.CombinedOutput()
		t.Logf("with user.max_ipc_namespaces=30:\n%s", out)
		if err != nil || !strings.Contains(string(out), "--- PASS: TestUsedUpNamespacesNeverUnconfine") {
			t.Errorf("with user.max_ipc_namespaces=30: %v", err)
		}
		return
	}
	a := launchEngine(t, testManager(t), `echo "engine $$"
n=0; while [ $n -lt 200 ]; do unshare -Ui sleep 300 </dev/null >/dev/null 2>&1 & p=$!; sleep 0.05; kill -0 $p 2>/dev/null || break; n=$((n+1)); done
echo "held $n"; echo "ready 1"; exec cat`)
	requireConfined(t, a)
	if got := a.expect(t, "engine", "held", "ready"); got["held"] == "200" {
		t.Fatalf("the tool held 200 IPC namespaces: the limit did not apply, the test proves nothing")
	}
	// A fresh controller's Manager: with the boot's probe mark (a
	// conversation started after the first), then without it (the first
	// launch of the boot, which probes).
	for _, mark := range []bool{true, false} {
		if !mark {
			unmarkProbed()
		}
		conv, exe := ids(t)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		h, err := testManager(t).Launch(ctx, Spec{Conversation: conv, Execution: exe, Argv: []string{"sh", "-c", "exec cat"}, Stderr: os.Stderr})
		cancel()
		if err == nil {
			t.Cleanup(func() { h.Abandon(context.Background()); h.Close() })
			if !h.Cohort.Confinement.Confined {
				t.Fatalf("probe mark %v: the next engine was launched unconfined while a tool held the IPC namespaces: %s", mark, h.Cohort.Confinement.Reason)
			}
			t.Fatalf("probe mark %v: the next engine launched confined although every IPC namespace was held: the test proves nothing", mark)
		}
		if !errors.Is(err, ErrNamespacesUsedUp) {
			t.Errorf("probe mark %v: launch: %v; want ErrNamespacesUsedUp", mark, err)
		}
	}
	a.Stop(ctxT(t), StopOptions{Stop: "stop-reach-limit", Grace: time.Second})
}

// TestEngineDevHoldsItsOwn: a confined engine's /dev holds the plain
// devices, the usual links and its own ptys, shared memory and queues,
// and the tool shell (read-only, like all of /dev), and nothing else:
// no device the user may open outside (the FUSE
// device, and where the machine has them the user's console, sound,
// cameras and security keys) is there, and no tool can put a file there.
// What the nodes do still works.
func TestEngineDevHoldsItsOwn(t *testing.T) {
	sandboxtest.Require(t)
	m := testManager(t)
	e := launchEngine(t, m, `echo "engine $$"
echo "dev $(cd /dev && ls -A | sort | tr '\n' ' ')"
echo "open $(for f in $(find /dev -xdev \( -type c -o -type b \) 2>/dev/null); do [ -r "$f" ] || [ -w "$f" ] && printf '%s ' "$f"; done)"
if ( : > /dev/mosaic-planted ) 2>/dev/null; then echo "plant 0"; else echo "plant 1"; fi
if ( : >> /dev/mosaic-bash ) 2>/dev/null; then echo "shellw 0"; else echo "shellw 1"; fi
if echo x > /dev/null && [ "$(head -c 4 /dev/urandom | wc -c)" = 4 ] && [ "$(head -c 3 /dev/zero | wc -c)" = 3 ] && ls /dev/fd/ >/dev/null && readlink /dev/stdin >/dev/null; then echo "nodes 0"; else echo "nodes 1"; fi
if script -qec 'tty' /dev/null 2>/dev/null | grep -q '^/dev/pts/'; then echo "pty 0"; else echo "pty 1"; fi
echo "ready 1"; exec cat`)
	requireConfined(t, e)
	got := e.expect(t, "engine", "dev", "open", "plant", "shellw", "nodes", "pty", "ready")
	if got["shellw"] != "1" {
		t.Errorf("a tool could write the tool shell %s", ToolShell)
	}
	want := "fd full mosaic-bash mqueue null ptmx pts random shm stderr stdin stdout tty urandom zero"
	if strings.TrimSpace(got["dev"]) != want {
		t.Errorf("the engine's /dev holds %q; want %q", strings.TrimSpace(got["dev"]), want)
	}
	for _, f := range strings.Fields(got["open"]) {
		switch strings.TrimPrefix(f, "/dev/") {
		case "null", "zero", "full", "random", "urandom", "tty", "ptmx", "pts/ptmx":
		default:
			t.Errorf("a tool may open %s", f)
		}
	}
	if got["plant"] != "1" {
		t.Error("a tool made a file in the engine's /dev")
	}
	if got["nodes"] != "0" {
		t.Error("the engine's null, zero, urandom or /dev/fd do not work")
	}
	if got["pty"] != "0" {
		t.Error("a tool's own pty (script) does not work")
	}
	eng := e.pin(t, got["engine"])
	assertProvenStop(t, e.Stop(ctxT(t), StopOptions{Stop: "stop-dev", Grace: time.Second}), eng)
}

// TestEngineDevGivenDevices: the devices a conversation gives its tools
// (Spec.Devices, `conv add --device`) are in the engine's /dev at their
// paths, a nested one too, and named in the confinement's evidence; one
// the machine lacks is left out and named absent; nothing else is added.
func TestEngineDevGivenDevices(t *testing.T) {
	sandboxtest.Require(t)
	var given []string
	for _, d := range []string{"/dev/fuse", "/dev/net/tun"} {
		if fi, err := os.Stat(d); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			given = append(given, d)
		}
	}
	if len(given) < 2 {
		sandboxtest.Unavailable(t, "the sandbox lacks /dev/fuse or /dev/net/tun (%v): no device to give", given)
	}
	m := testManager(t)
	e := launchWith(t, m, `echo "engine $$"
echo "dev $(cd /dev && ls -A | sort | tr '\n' ' ')"
echo "given $(for f in /dev/fuse /dev/net/tun; do [ -c "$f" ] && [ -w "$f" ] && printf '%s ' "$f"; done)"
echo "ready 1"; exec cat`, func(s *Spec) { s.Devices = append(slices.Clone(given), "/dev/mosaic-no-such-device") })
	requireConfined(t, e)
	got := e.expect(t, "engine", "dev", "given", "ready")
	if want := "fd full fuse mosaic-bash mqueue net null ptmx pts random shm stderr stdin stdout tty urandom zero"; strings.TrimSpace(got["dev"]) != want {
		t.Errorf("the engine's /dev holds %q; want %q", strings.TrimSpace(got["dev"]), want)
	}
	if strings.TrimSpace(got["given"]) != strings.Join(given, " ") {
		t.Errorf("a tool may open %q of the devices given; want %q", got["given"], given)
	}
	if c := e.Cohort.Confinement; !slices.Equal(c.Devices, given) {
		t.Errorf("the confinement names devices %v; want %v", c.Devices, given)
	}
	eng := e.pin(t, got["engine"])
	assertProvenStop(t, e.Stop(ctxT(t), StopOptions{Stop: "stop-devices", Grace: time.Second}), eng)
}

// TestDevicePaths: the launch refuses what devices.Check refuses (the
// conversation file may have changed since conv add checked it), as a
// confinement refusal, and drops the plain devices and repeats.
func TestDevicePaths(t *testing.T) {
	if got, err := devicePaths([]string{"/dev/kvm", "/dev/null", "/dev/kvm"}); err != nil || !slices.Equal(got, []string{"/dev/kvm"}) {
		t.Errorf("devicePaths = %q, %v; want [/dev/kvm]", got, err)
	}
	if _, err := devicePaths([]string{"/dev/pts/0"}); !errors.Is(err, ErrConfinement) || !errors.Is(err, devices.ErrRefused) {
		t.Errorf("devicePaths(/dev/pts/0) = %v; want ErrConfinement and devices.ErrRefused", err)
	}
}
