package scopes

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
)

// TestConfinedToolCannotAbortTheUsersFUSE: fusectl (systemd mounts it on
// /sys/fs/fuse/connections) shows every FUSE connection of the machine, and
// each one's files (abort, max_background, congestion_threshold) belong to
// the mount's owner: the user for an sshfs, an rclone mount, gvfs or the
// document portal. A tool, the same uid, would write abort and leave every
// one of the user's FUSE mounts failing (ENOTCONN), their servers ended.
func TestConfinedToolCannotAbortTheUsersFUSE(t *testing.T) {
	sandboxtest.Require(t)
	m := testManager(t)
	if _, err := os.Stat("/sys/fs/fuse/connections"); err != nil {
		sandboxtest.Unavailable(t, "no fusectl: %v", err)
	}
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The user's own FUSE mount, outside any engine.
	d := t.TempDir()
	srv := exec.Command("unshare", "-Urm", "sh", "-c", `exec env `+fuseServeEnv+`="$1" "$0"`, bin, d)
	srv.Stdout, srv.Stderr = os.Stderr, os.Stderr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var waitErr error
	go func() { waitErr = srv.Wait(); close(done) }()
	t.Cleanup(func() { srv.Process.Kill(); <-done })
	var conns []string
	for end := time.Now().Add(10 * time.Second); len(conns) == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			sandboxtest.Unavailable(t, "the user's FUSE server did not mount")
		}
		conns, _ = filepath.Glob("/sys/fs/fuse/connections/*/abort")
	}
	t.Logf("fusectl shows %v", conns)
	// Outside the engine the user may write it.
	if f, err := os.OpenFile(conns[0], os.O_WRONLY, 0); err != nil {
		t.Fatalf("the user cannot write abort of its own FUSE connection outside the engine: %v; the attempt inside proves nothing", err)
	} else {
		f.Close()
	}
	e := launchEngine(t, m, `echo "engine $$"
n=0; for a in /sys/fs/fuse/connections/*/abort; do [ -e "$a" ] && echo 1 > "$a" 2>/dev/null && n=$((n+1)); done
echo "aborted $n"
echo "ready 1"; exec cat`)
	requireConfined(t, e)
	got := e.expect(t, "engine", "aborted", "ready")
	select {
	case <-done:
		t.Errorf("the user's FUSE server ended (%v) after a tool wrote abort to %s of its connections", waitErr, got["aborted"])
	case <-time.After(time.Second):
	}
	if strings.TrimSpace(got["aborted"]) != "0" {
		t.Errorf("a tool aborted %s of the user's FUSE connections", got["aborted"])
	}
}
