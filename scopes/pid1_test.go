package scopes

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestConfinedEngineUnderPID1: the held child stays PID 1 of the engine's
// pid namespace. The TERM phase's SIGTERM reaches an engine that handles
// it (forwarded, and sent directly); the engine's own exit status is the
// handle's ExitErr; files the engine writes belong to the user, whose uid
// it keeps inside; and when the engine exits the rest of its namespace
// dies with it.
func TestConfinedEngineUnderPID1(t *testing.T) {
	m := testManager(t)
	t.Run("SIGTERM reaches the engine", func(t *testing.T) {
		e := launchEngine(t, m, `trap 'echo "term 1"; exit 0' TERM; echo "engine $$"; echo "ready 1"; while :; do sleep 0.05; done`)
		got := e.expect(t, "engine", "ready")
		if got["engine"] == "1" {
			t.Fatal("the engine is PID 1 of its namespace; the held child should be")
		}
		term := e.Term(ctxT(t), 5*time.Second)
		if term.Outcome != Stopping || !term.Emptied {
			t.Fatalf("TERM phase %+v: want stopping, emptied", term)
		}
		e.expect(t, "term")
		<-e.Done()
		if err := e.ExitErr(); err != nil {
			t.Fatalf("engine exit %v, want its status 0", err)
		}
	})
	t.Run("exit status", func(t *testing.T) {
		e := launchEngine(t, m, `echo "ready 1"; read x; exit 3`)
		e.expect(t, "ready")
		e.Stdin.WriteString("go\n")
		<-e.Done()
		var ee *exec.ExitError
		if err := e.ExitErr(); !errors.As(err, &ee) || ee.ExitCode() != 3 {
			t.Fatalf("ExitErr %v, want the engine's exit status 3", err)
		}
	})
	t.Run("ownership and uid", func(t *testing.T) {
		dir := t.TempDir()
		e := launchEngine(t, m, fmt.Sprintf(`echo "uid $(id -u)"; echo x > %s/written; echo "ready 1"; exec cat`, dir))
		got := e.expect(t, "uid", "ready")
		if got["uid"] != strconv.Itoa(os.Getuid()) {
			t.Fatalf("engine runs as uid %s inside, want the user's %d", got["uid"], os.Getuid())
		}
		fi, err := os.Stat(filepath.Join(dir, "written"))
		if err != nil {
			t.Fatal(err)
		}
		if uid := statUID(fi); uid != os.Getuid() {
			t.Fatalf("a file the engine wrote belongs to uid %d, want %d", uid, os.Getuid())
		}
	})
	t.Run("engine exit ends the namespace", func(t *testing.T) {
		e := launchEngine(t, m, `setsid sh -c 'echo "setsid $$"; exec sleep 300' </dev/null & echo "ready 1"; read x; exit 0`)
		got := e.expect(t, "setsid", "ready")
		child := e.pin(t, got["setsid"])
		e.Stdin.WriteString("go\n")
		<-e.Done()
		child.waitDead(t)
		// Nothing left, so the kill phase proves an empty cohort.
		res := e.Kill(ctxT(t), StopOptions{Stop: "stop-after-exit"})
		if res.Outcome != Stopped {
			t.Fatalf("%s: %s", res.Outcome, strings.Join(append([]string{res.Reason}, res.Notes...), "; "))
		}
	})
}
