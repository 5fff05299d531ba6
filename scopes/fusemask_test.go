package scopes

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
)

// fuseOpenEnv, set, makes the test binary try the FUSE device instead of
// running tests (tryFUSEIfAsked): it opens the path fuseOpenEnv names and,
// when fuseMountEnv names a directory, mounts a FUSE filesystem there on
// that descriptor, as a FUSE server does. It exits 0 when it got the FUSE
// device (or the mount) and 1, saying why on stderr, when not.
const (
	fuseOpenEnv  = "MOSAIC_TEST_FUSE_OPEN"
	fuseMountEnv = "MOSAIC_TEST_FUSE_MOUNT"
)

// fuseProbes tries every way to the FUSE device that the confinement must
// close, from wherever it runs (%[1]s the test binary, %[2]d a process
// outside the engine): each attempt prints "escape NAME 0" when it got
// through and "escape NAME 1" when it did not. nested runs an attempt as
// root of a user and mount namespace of its own (unshare -Urm, as any
// tool can) in a fresh directory: its second argument first (undo the
// mask, bind /dev, make a node), then a FUSE mount on mnt with the device
// at its first argument.
const fuseProbes = `bin=%[1]s
try() { n=$1; shift; if "$@" </dev/null >/dev/null 2>&1; then echo "escape $n 0"; else echo "escape $n 1"; fi; }
dev() { ` + fuseOpenEnv + `="$1" "$bin"; }
nested() {
	unshare -Urm sh -c 'cd "$(mktemp -d)" && mkdir mnt dev || exit 1
eval "$2"
` + fuseOpenEnv + `="$1" ` + fuseMountEnv + `="$PWD/mnt" exec "$0"' "$bin" "$1" "$2"
}
try nested-userns unshare -Urm true
try fuse-open dev /dev/fuse
try fuse-char dev /dev/char/10:229
try fuse-proc-root dev /proc/$$/root/dev/fuse
try fuse-proc-outside-root dev /proc/%[2]d/root/dev/fuse
try fuse-mount nested /dev/fuse true
try fuse-mount-char nested /dev/char/10:229 true
try fuse-umount nested /dev/fuse 'umount /dev/fuse || umount -l /dev/fuse'
try fuse-umount-proc-root nested /proc/$$/root/dev/fuse 'umount /dev/fuse || umount -l /dev/fuse'
try fuse-bind nested dev/fuse 'mount --bind /dev dev'
try fuse-mknod nested dev/fuse 'mount -t tmpfs t dev && mknod dev/fuse c 10 229'
`

var (
	fuseEscapes = []string{"fuse-open", "fuse-char", "fuse-proc-root", "fuse-proc-outside-root", "fuse-mount", "fuse-mount-char",
		"fuse-umount", "fuse-umount-proc-root", "fuse-bind", "fuse-mknod"}
	// fuseControls must get through outside the engine, or the
	// attempts inside prove nothing.
	fuseControls = []string{"nested-userns", "fuse-open", "fuse-char", "fuse-proc-root", "fuse-mount", "fuse-mount-char"}
)

// TestConfinedToolCannotReachFUSE: no tool of a confined engine can open
// the FUSE device or mount a FUSE filesystem, by /dev/fuse, by
// /dev/char/10:229, through /proc/<pid>/root, or as root of a nested user
// and mount namespace that tries to unmount the mask, to bind /dev
// without it or to make a device node of its own; outside the engine the
// same attempts by the same user get the device and mount. A FUSE mount
// is how a tool could make its cohort unkillable: a reader that holds
// the connection's /dev/fuse sleeps through SIGKILL until the connection
// is aborted, which no stop does (killUnfrozen). The masks record it,
// and the stop that follows is proven.
func TestConfinedToolCannotReachFUSE(t *testing.T) {
	m := testManager(t)
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("no FUSE on this machine: %v", err)
	}
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	probes := fmt.Sprintf(fuseProbes, shellQuote(bin), os.Getpid())
	out, err := exec.Command("sh", "-c", probes).Output()
	if err != nil {
		t.Fatalf("the FUSE probes outside the engine: %v", err)
	}
	outside := escapeLines(string(out))
	t.Logf("outside the engine: %v", outside)
	for _, n := range fuseControls {
		if outside[n] != "0" {
			sandboxtest.Unavailable(t, "outside the engine %s did not get through (%q): the attempt inside would prove nothing", n, outside[n])
		}
	}
	e := launchEngine(t, m, `echo "engine $$"
`+probes+`echo "ready 1"; exec cat`)
	if c := e.Cohort.Confinement; !c.Confined {
		t.Fatalf("engine not confined: %s", c.Reason)
	}
	prefixes := []string{"engine", "ready", "escape nested-userns"}
	for _, n := range fuseEscapes {
		prefixes = append(prefixes, "escape "+n)
	}
	got := e.expect(t, prefixes...)
	if got["escape nested-userns"] != "0" {
		t.Fatalf("the engine could not make a nested user namespace (%q): the attempts there prove nothing", got["escape nested-userns"])
	}
	for _, n := range fuseEscapes {
		if got["escape "+n] != "1" {
			t.Errorf("escape %s got through (%q)", n, got["escape "+n])
		}
	}
	if !slices.Contains(e.Cohort.Confinement.Masked, "/dev") {
		t.Errorf("/dev, the engine's own, not among the recorded masks %v", e.Cohort.Confinement.Masked)
	}
	eng := e.pin(t, got["engine"])
	res := e.Stop(ctxT(t), StopOptions{Stop: "stop-fuse-mask", Grace: time.Second})
	assertProvenStop(t, res, eng)
	requireProof(t, res)
}

// escapeLines maps each "escape NAME RESULT" line of out to its result.
func escapeLines(out string) map[string]string {
	got := map[string]string{}
	for l := range strings.SplitSeq(out, "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "escape" {
			got[f[1]] = f[2]
		}
	}
	return got
}

// tryFUSEIfAsked opens the path fuseOpenEnv names and, when fuseMountEnv
// is set, mounts a FUSE filesystem on that directory with the descriptor
// (the kernel refuses a descriptor that is not the FUSE device), then
// exits: 0 when it got the device, or the mount, 1 otherwise. It returns
// at once when fuseOpenEnv is not set. The connection ends with the
// process, whose descriptor is its only one: nothing can wait on it.
func tryFUSEIfAsked() {
	dev := os.Getenv(fuseOpenEnv)
	if dev == "" {
		return
	}
	fail := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, format+"\n", args...)
		os.Exit(1)
	}
	fd, err := unix.Open(dev, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		fail("open %s: %v", dev, err)
	}
	dir := os.Getenv(fuseMountEnv)
	if dir == "" {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			fail("fstat %s: %v", dev, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != unix.Mkdev(10, 229) {
			fail("%s opened %d:%d, not the FUSE device 10:229", dev, unix.Major(st.Rdev), unix.Minor(st.Rdev))
		}
		os.Exit(0)
	}
	opts := fmt.Sprintf("fd=%d,rootmode=40000,user_id=%d,group_id=%d", fd, os.Getuid(), os.Getgid())
	if err := unix.Mount("mosaictest", dir, "fuse", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		fail("mount fuse on %s with %s: %v", dir, dev, err)
	}
	unix.Unmount(dir, unix.MNT_DETACH)
	os.Exit(0)
}

// devCopyEnv, set, names a directory where /dev is bound again, in the
// mount namespace a test re-run by withDevBound runs its manager in.
const devCopyEnv = "MOSAIC_TEST_DEV_COPY"

// withDevBound returns the directory /dev is bound at again when the
// test called name runs in a mount namespace of its own with that second
// /dev (a chroot's, bound by root for a build); else it re-runs name so
// (unshare -Urm, then back to the user's own uid), reports how that run
// went, and returns "".
func withDevBound(t *testing.T, name string) string {
	t.Helper()
	if dir := os.Getenv(devCopyEnv); dir != "" {
		return dir
	}
	if err := exec.Command("unshare", "-Urm", "true").Run(); err != nil {
		sandboxtest.Unavailable(t, "no user and mount namespace of the test's own (unshare -Urm: %v): a second /dev cannot be bound", err)
	}
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command("unshare", "-Urm", "sh", "-c", `mount --rbind /dev "$1" && exec unshare --map-user=$2 --map-group=$3 "$0" -test.run="^$4\$" -test.count=1 -test.v`,
		bin, dir, fmt.Sprint(os.Getuid()), fmt.Sprint(os.Getgid()), name)
	cmd.Env = append(os.Environ(), devCopyEnv+"="+dir)
	out, err := cmd.CombinedOutput()
	t.Logf("in a mount namespace with /dev bound at %s:\n%s", dir, out)
	switch {
	case err != nil:
		t.Fatalf("the test in a mount namespace with a second /dev: %v", err)
	case strings.Contains(string(out), "--- SKIP"):
		sandboxtest.Unavailable(t, "the test in a mount namespace with a second /dev skipped")
	case !strings.Contains(string(out), "--- PASS: "+name):
		t.Fatalf("the test in a mount namespace with a second /dev did not run")
	}
	return ""
}

// TestConfinedToolCannotReachAnotherDev: the FUSE device is masked
// wherever the devtmpfs shows it, not only at /dev/fuse: a second mount
// of /dev (a chroot's /dev, bound by root for a build) holds the same
// node. The test runs its manager in a mount namespace of its own with
// /dev bound again (unshare -Urm, then back to the user's own uid), as
// on a machine with such a mount; a tool of a confined engine must
// neither open the device there nor mount FUSE with it, which the test
// itself can. Masked at /dev/fuse alone, the tool did both.
func TestConfinedToolCannotReachAnotherDev(t *testing.T) {
	sandboxtest.Require(t)
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("no FUSE on this machine: %v", err)
	}
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := withDevBound(t, "TestConfinedToolCannotReachAnotherDev")
	if dir == "" {
		return
	}
	// The device opened, then a FUSE mount on it as root of a nested
	// user and mount namespace.
	probes := fmt.Sprintf(`bin=%s node=%s
try() { n=$1; shift; if "$@" </dev/null >/dev/null 2>&1; then echo "escape $n 0"; else echo "escape $n 1"; fi; }
try other-dev env `+fuseOpenEnv+`="$node" "$bin"
try other-dev-mount unshare -Urm sh -c 'cd "$(mktemp -d)" && mkdir mnt && `+fuseOpenEnv+`="$1" `+fuseMountEnv+`="$PWD/mnt" exec "$0"' "$bin" "$node"
`, shellQuote(bin), shellQuote(dir+"/fuse"))
	escapes := []string{"other-dev", "other-dev-mount"}
	out, err := exec.Command("sh", "-c", probes).Output()
	outside := escapeLines(string(out))
	for _, n := range escapes {
		if err != nil || outside[n] != "0" {
			sandboxtest.Unavailable(t, "outside the engine %s did not get through (%q, %v): the attempt inside would prove nothing", n, outside[n], err)
		}
	}
	m := testManager(t)
	e := launchEngine(t, m, `echo "engine $$"
`+probes+`echo "ready 1"; exec cat`)
	if c := e.Cohort.Confinement; !c.Confined {
		t.Fatalf("engine not confined: %s", c.Reason)
	}
	got := e.expect(t, "engine", "escape other-dev", "escape other-dev-mount", "ready")
	for _, n := range escapes {
		if got["escape "+n] != "1" {
			t.Errorf("escape %s through the devtmpfs at %s got through (%q); masks %v", n, dir, got["escape "+n], e.Cohort.Confinement.Masked)
		}
	}
	eng := e.pin(t, got["engine"])
	res := e.Stop(ctxT(t), StopOptions{Stop: "stop-other-dev", Grace: time.Second})
	assertProvenStop(t, res, eng)
}
