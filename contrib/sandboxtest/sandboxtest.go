// Package sandboxtest is the Go side of the systemd test sandbox
// (contrib/sandbox). Integration tests call Require to learn about the real
// user manager they run under; where there is none they skip with a reason,
// except under CI=true, where a missing sandbox is a failure: CI always
// provides one, so a skip there would hide untested code.
package sandboxtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Env describes the systemd a test runs under.
type Env struct {
	// UID is the test user's uid; the user manager runs as this user.
	UID int
	// RuntimeDir is $XDG_RUNTIME_DIR (/run/user/<uid>).
	RuntimeDir string
	// BusAddress is the user bus address.
	BusAddress string
	// PeerUser names a second, unprivileged user the test user may run
	// programs as (sudo -n -u), or "" when there is none.
	PeerUser string
}

const hint = "run the tests as root with `make test` (it boots a systemd sandbox, see docs/sandbox.md), " +
	"or set MOSAIC_TEST_REAL_USER_MANAGER=1 to use this machine's own user manager"

// Require returns the sandbox environment, or skips (fails under CI=true)
// when the test does not run under a reachable systemd user manager.
func Require(tb testing.TB) Env {
	tb.Helper()
	env, err := detect()
	if err != nil {
		Unavailable(tb, "no systemd user manager: %v; %s", err, hint)
	}
	return env
}

// Unavailable skips the test with the reason, or fails it under CI=true.
func Unavailable(tb testing.TB, format string, args ...any) {
	tb.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		tb.Fatalf("CI must provide this: %s", msg)
	}
	tb.Skip(msg)
}

func detect() (Env, error) {
	if os.Getenv("MOSAIC_SANDBOX") != "1" && os.Getenv("MOSAIC_TEST_REAL_USER_MANAGER") != "1" {
		return Env{}, fmt.Errorf("not inside the test sandbox")
	}
	env := Env{UID: os.Getuid(), RuntimeDir: os.Getenv("XDG_RUNTIME_DIR"), PeerUser: os.Getenv("MOSAIC_SANDBOX_PEER")}
	if env.RuntimeDir == "" {
		env.RuntimeDir = "/run/user/" + strconv.Itoa(env.UID)
	}
	env.BusAddress = os.Getenv("DBUS_SESSION_BUS_ADDRESS")
	if env.BusAddress == "" {
		env.BusAddress = "unix:path=" + filepath.Join(env.RuntimeDir, "bus")
	}
	// The manager's private socket answers only while the manager runs.
	c, err := net.DialTimeout("unix", filepath.Join(env.RuntimeDir, "systemd", "private"), 5*time.Second)
	if err != nil {
		return Env{}, fmt.Errorf("user manager socket: %w", err)
	}
	c.Close()
	if env.PeerUser != "" {
		if _, err := user.Lookup(env.PeerUser); err != nil {
			env.PeerUser = ""
		}
	}
	return env, nil
}

// Bin returns the path of a project binary built before the tests ran
// (`make test` builds them into $MOSAIC_BIN_DIR), skipping (failing under CI)
// when it is missing. Tests run binaries built from the same tree rather
// than building inside the sandbox, which has no module cache.
func Bin(tb testing.TB, name string) string {
	tb.Helper()
	dir := os.Getenv("MOSAIC_BIN_DIR")
	if dir == "" {
		Unavailable(tb, "MOSAIC_BIN_DIR is not set: run `make test`, which builds %s first", name)
	}
	p := filepath.Join(dir, name)
	if _, err := os.Stat(p); err != nil {
		Unavailable(tb, "binary %s: %v: run `make test`, which builds it", name, err)
	}
	return p
}

// AsPeer returns a command that runs name with args as the sandbox's peer
// user, for tests that need a second uid (a peer whose credentials differ).
func (e Env) AsPeer(tb testing.TB, name string, args ...string) *exec.Cmd {
	tb.Helper()
	if e.PeerUser == "" {
		Unavailable(tb, "no peer user in this sandbox")
	}
	return exec.Command("sudo", append([]string{"-n", "-u", e.PeerUser, "--", name}, args...)...)
}

// JournalRateLimit sets the sandbox's journald rate limit (RateLimitIntervalSec=
// interval, RateLimitBurst=burst, for every unit) until the test ends; the
// sandbox otherwise runs journald without one. It restarts journald, which
// forgets what it counted so far. Only the sandbox can do this (a fixed root
// helper, see contrib/sandbox/inner.sh); elsewhere the test is unavailable.
func JournalRateLimit(tb testing.TB, interval string, burst int) {
	tb.Helper()
	const helper = "/usr/local/sbin/mosaic-sandbox-journald"
	set := func(args ...string) error {
		out, err := exec.Command("sudo", append([]string{"-n", helper, "ratelimit"}, args...)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s %v: %v: %s", helper, args, err, out)
		}
		return nil
	}
	if err := set(interval, strconv.Itoa(burst)); err != nil {
		Unavailable(tb, "cannot set journald's rate limit: %v", err)
	}
	tb.Cleanup(func() {
		if err := set("off"); err != nil {
			tb.Errorf("restore journald's rate limit: %v", err)
		}
	})
}

// Scope runs script with bash in a transient scope named name (name.scope)
// of the sandbox's user manager, with the unit properties props (such as
// Delegate=yes), handing it extra as fds 3 and on, and stops it when the
// test ends. A name starting with mosaic-engine- makes the scope one that
// mosaic takes for an engine's.
func Scope(tb testing.TB, name string, props []string, script string, extra ...*os.File) {
	tb.Helper()
	args := []string{"--user", "--scope", "--quiet", "--unit=" + name}
	for _, p := range props {
		args = append(args, "-p", p)
	}
	cmd := exec.Command("systemd-run", append(args, "--", "bash", "-c", script)...)
	cmd.ExtraFiles = extra
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		exec.Command("systemctl", "--user", "stop", name+".scope").Run()
	})
}
