package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
)

// escapeTool is issue 10's attack, as the real Pi's bash tool runs it: a
// service and a scope of the user manager, and a move of the tool's own
// child into a new cgroup beside the engine's scope. Each attempt records
// its exit status in escapes.txt.
const escapeTool = `systemd-run --user --collect sleep 1002 </dev/null >/dev/null 2>&1; echo "systemd-run $?" > escapes.txt
(systemd-run --user --scope sleep 1003 </dev/null >/dev/null 2>&1; echo "scope $?" >> escapes.txt) &
CG=/sys/fs/cgroup/user.slice/user-$(id -u).slice/user@$(id -u).service/app.slice
sh -c 'mkdir "$1" && echo $$ > "$1/cgroup.procs"; echo "move $?" >> escapes.txt; exec sleep 1001' _ "$CG/evil.scope" </dev/null >/dev/null 2>&1 &
setsid sleep 1004 </dev/null >/dev/null 2>&1 &
sleep 1; echo started`

// TestEscapesOnRealPi (K13): the three escapes of issue 10 from a bash tool of
// the real Pi, then `stop --take --yes --proof`: the stop is stopped, no
// process the tool started lives on anywhere (the whole process list), and
// `proof verify` passes with the confinement check.
func TestEscapesOnRealPi(t *testing.T) {
	sandboxtest.Require(t)
	pc := realPiConversation(t, "escape", stubmodel.Script{Turns: []stubmodel.Turn{
		{Text: []string{"Trying ", "to escape."}, Tool: &stubmodel.ToolCall{Command: escapeTool}},
		{Text: []string{"Tried."}},
	}})
	bin, id := pc.bin, pc.id
	t.Cleanup(func() {
		for _, pid := range processesRunning(t, "sleep 1001", "sleep 1002", "sleep 1003", "sleep 1004") {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	if r := run(t, bin, "prompt", "--take", "--timeout", "2m", id, "escape"); r.code != 0 || !strings.Contains(r.stdout, "Tried.") {
		t.Fatalf("prompt: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	// The attempts ran (so their failure means something).
	var log string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		b, _ := os.ReadFile(filepath.Join(pc.proj, "escapes.txt"))
		if log = string(b); strings.Contains(log, "systemd-run ") && strings.Contains(log, "move ") || time.Now().After(deadline) {
			break
		}
	}
	if !strings.Contains(log, "systemd-run ") || !strings.Contains(log, "move ") {
		t.Fatalf("the tool did not run its escapes: escapes.txt %q", log)
	}
	if len(processesRunning(t, "sleep 1004")) != 1 {
		t.Fatal("the tool's setsid child is not running: the process list is not being read")
	}
	proof := filepath.Join(t.TempDir(), "proof.json")
	if r := run(t, bin, "stop", "--take", "--yes", "--proof", proof, id); r.code != 0 {
		t.Fatalf("stop --take --yes --proof: exit %d, stdout %q, stderr %q (escapes: %q)", r.code, r.stdout, r.stderr, log)
	}
	time.Sleep(500 * time.Millisecond) // a service systemd-run asked for starts asynchronously
	if left := processesRunning(t, "sleep 1001", "sleep 1002", "sleep 1003", "sleep 1004"); len(left) > 0 {
		t.Fatalf("processes the tool started live on after the stop: pids %v (escapes: %q)", left, log)
	}
	out := mustRun(t, bin, "proof", "verify", proof)
	if !strings.Contains(out, "verified: all") || !strings.Contains(out, "ok    confinement") {
		t.Fatalf("proof verify said\n%s", out)
	}
}

// processesRunning returns the pid of every process, anywhere in this
// test's view of the system, whose command line ends with one of cmds.
func processesRunning(t *testing.T, cmds ...string) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, d := range ents {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + d.Name() + "/cmdline")
		if err != nil || len(b) == 0 {
			continue
		}
		argv := strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
		for _, c := range cmds {
			if strings.HasSuffix(argv, c) {
				out = append(out, pid)
			}
		}
	}
	return out
}
