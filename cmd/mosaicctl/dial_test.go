package main

import (
	"os"
	"strings"
	"testing"

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
