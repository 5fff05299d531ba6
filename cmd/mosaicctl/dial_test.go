package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/client"
	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
)

// TestClientStartsTheSocket: a client of a registered conversation whose
// socket unit is not started starts it over D-Bus and connects (which
// socket-activates the controller); an id that is not registered is
// refused unknown-conversation and starts nothing.
func TestClientStartsTheSocket(t *testing.T) {
	sandboxtest.Require(t)
	bin := sandboxtest.Bin(t, "mosaicctl")
	pi := os.Getenv("MOSAIC_PI")
	if pi == "" {
		sandboxtest.Unavailable(t, "MOSAIC_PI is not set: `make test` installs the pinned Pi")
	}
	mustRun(t, bin, "install")
	t.Cleanup(func() { run(t, bin, "uninstall", "--force") })
	proj, session := project(t, "dial")
	id := strings.TrimSpace(mustRun(t, bin, "conv", "add", "--project", proj, "--seat", "dial", "--session", session,
		"--engine", pi))
	sock := "mosaic-conv@" + id + ".socket"
	t.Cleanup(func() { endConversation(t, bin, id) })
	if r := run(t, "systemctl", "--user", "is-active", sock); strings.TrimSpace(r.stdout) == "active" {
		t.Fatalf("%s is active before any client", sock)
	}

	r := run(t, bin, "hello", id)
	if r.code != 0 || !strings.Contains(r.stdout, `"record":"welcome"`) || !strings.Contains(r.stderr, "started "+sock) {
		t.Fatalf("hello of a conversation whose socket is stopped: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if r := run(t, "systemctl", "--user", "is-active", sock); strings.TrimSpace(r.stdout) != "active" {
		t.Fatalf("%s is %q after hello", sock, r.stdout)
	}
	// Once started, a client connects without starting anything.
	if r := run(t, bin, "hello", id); r.code != 0 || strings.Contains(r.stderr, "started") {
		t.Fatalf("second hello: exit %d, stderr %q", r.code, r.stderr)
	}

	unknown := "pi-00000000000000000000"
	r = run(t, bin, "prompt", unknown, "hi")
	if r.code != 2 || !strings.HasPrefix(r.stderr, "mosaicctl: unknown-conversation:") {
		t.Fatalf("prompt to an unregistered id: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := run(t, "systemctl", "--user", "is-active", "mosaic-conv@"+unknown+".socket"); strings.TrimSpace(r.stdout) == "active" {
		t.Fatal("a client of an unregistered id started its socket")
	}
}

// TestDialHint: a connect that ran out of time says so (the --timeout, or
// the verb's own limit) instead of asking whether the socket is started,
// which only a missing or refusing socket gets.
func TestDialHint(t *testing.T) {
	dir := t.TempDir()
	silent := filepath.Join(dir, "silent.sock")
	ln, err := net.Listen("unix", silent) // accepts, never says welcome
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	expired := func(cause error) context.Context {
		ctx, cancel := context.WithTimeoutCause(context.Background(), time.Millisecond, cause)
		t.Cleanup(cancel)
		<-ctx.Done()
		return ctx
	}
	dial := func(ctx context.Context, path string) error {
		cl, err := client.Dial(ctx, path, client.Options{Name: "test"})
		if err == nil {
			cl.Close()
			t.Fatal("dial succeeded")
		}
		return err
	}
	started := "is mosaic-conv@" + anID + ".socket started?"
	for _, tc := range []struct {
		name      string
		ctx       context.Context
		err       func(ctx context.Context) error
		want, not string
	}{
		{"--timeout passed on a silent socket", expired(timeoutError{time.Millisecond}),
			func(ctx context.Context) error { return dial(ctx, silent) },
			"the --timeout of 1ms passed before the controller answered: too short, or the controller is slow to start", started},
		{"the dialer's own i/o timeout under --timeout", expired(timeoutError{time.Millisecond}),
			func(context.Context) error {
				return &net.OpError{Op: "dial", Net: "unix", Err: os.ErrDeadlineExceeded}
			},
			"the --timeout of 1ms passed before the controller answered", started},
		{"the verb's own limit", expired(context.DeadlineExceeded),
			func(ctx context.Context) error { return dial(ctx, silent) },
			"the controller did not answer within 1m0s: it is slow to start or stuck; `systemctl --user status mosaic-conv@" + anID + ".service`", started},
		{"no socket", context.Background(),
			func(ctx context.Context) error { return dial(ctx, filepath.Join(dir, "missing.sock")) },
			started, "--timeout"},
		{"refused", context.Background(),
			func(context.Context) error {
				return &net.OpError{Op: "dial", Net: "unix", Err: syscall.ECONNREFUSED}
			},
			started, "--timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.err(tc.ctx)
			got := dialHint(tc.ctx, anID, err, connectTimeout)
			if !strings.Contains(got, tc.want) || strings.Contains(got, tc.not) {
				t.Fatalf("dialHint for %v:\n%s\nwant it to contain %q and not %q", err, got, tc.want, tc.not)
			}
		})
	}
}
