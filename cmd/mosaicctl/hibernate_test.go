package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/client"
	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/scopes"
	"github.com/mosaic-agents/mosaic/units"
	"golang.org/x/sys/unix"
)

// engineScopes counts the engine scopes of conversation id that run.
func engineScopes(t *testing.T, id string) int {
	t.Helper()
	n := 0
	out := run(t, "systemctl", "--user", "list-units", "--plain", "--no-legend", "--state=active", "mosaic-engine-*.scope").stdout
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			if conv, _, ok := scopes.ParseEngineScope(f[0]); ok && conv == id {
				n++
			}
		}
	}
	return n
}

// promptOnce connects, takes control, prompts text, waits for the run to
// settle and disconnects; it returns the binding after the run.
func promptOnce(t *testing.T, ctx context.Context, path, text string) protocol.Binding {
	t.Helper()
	lib := dialLib(t, path)
	defer lib.c.Close()
	waitFor(t, func() bool { b := lib.c.State().Binding; return b != nil && b.State == protocol.BindingActive })
	if _, err := lib.c.Takeover(ctx); err != nil {
		t.Fatal(err)
	}
	runs := lib.runs()
	if r, err := lib.c.Prompt(ctx, text); err != nil || r.State != protocol.ReceiptAcknowledged {
		t.Fatalf("prompt %q: %v %+v", text, err, r)
	}
	waitFor(t, func() bool { return lib.runs() > runs })
	waitFor(t, func() bool { b := lib.c.State().Binding; return b != nil && b.Leaf != "" && b.EngineState == "idle" })
	return *lib.c.State().Binding
}

// lastEntry returns the id of the session file's last entry.
func lastEntry(t *testing.T, proj string) string {
	t.Helper()
	lines := sessionLines(t, proj)
	var e struct{ ID string }
	json.Unmarshal([]byte(lines[len(lines)-1]), &e)
	return e.ID
}

// onLeaf reports whether leaf is pinned, or reaches pinned through
// entries Pi appends by itself at start (model and thinking changes):
// a launch on pinned.
func onLeaf(t *testing.T, proj, leaf, pinned string) bool {
	t.Helper()
	type entry struct{ ID, ParentID, Type string }
	byID := map[string]entry{}
	for _, line := range sessionLines(t, proj) {
		var e entry
		if json.Unmarshal([]byte(line), &e) == nil && e.ID != "" {
			byID[e.ID] = e
		}
	}
	for id := leaf; id != pinned; id = byID[id].ParentID {
		if e, ok := byID[id]; !ok || (e.Type != "model_change" && e.Type != "thinking_level_change") {
			return false
		}
	}
	return true
}

// hibernated waits until the conversation has neither a controller nor an
// engine.
func hibernated(t *testing.T, id string) {
	t.Helper()
	svc := "mosaic-conv@" + id + ".service"
	waitFor(t, func() bool { return unitProp(t, svc, "ActiveState") == "inactive" && engineScopes(t, id) == 0 })
}

// toolRelease is the FIFO, in the project (the engine's working
// directory), whose line ends TestHibernateAndWake's background tool.
const toolRelease = "release-tool"

// TestHibernateAndWake: with --idle-stop, a conversation left idle ends
// its engine and its controller, with a proof recorded as the idle
// policy's; the next client's connection wakes it on the same leaf,
// without a confirmation, and it takes prompts again. A tool process left
// running and a connected client each keep it awake.
func TestHibernateAndWake(t *testing.T) {
	sandboxtest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	entry, stdinLog := fakeEngine(t, stubmodel.Script{Turns: []stubmodel.Turn{
		{Text: []string{"starting "}, Tool: &stubmodel.ToolCall{Command: "setsid sh -c 'read x < " + toolRelease + "' >/dev/null 2>&1 & echo started"}},
		{Text: []string{"started."}},
	}})
	bin := sandboxtest.Bin(t, "mosaicctl")
	id, proj, path := startConversation(t, bin, "idle", "--engine", entry, "--provider", "fakellm", "--model", "fake-model", "--idle-stop", "1s")
	svc := "mosaic-conv@" + id + ".service"
	if st := claimOf(t, bin, id); st.IdleStop != "1s" {
		t.Fatalf("status --json idleStop %q; want 1s", st.IdleStop)
	}
	// doctor's exit status is about the host (the sandbox fails other
	// checks); its idle-policy line is what matters here.
	if out := run(t, bin, "doctor").stdout; !strings.Contains(out, id+" after 1s") {
		t.Fatalf("doctor does not show the idle policy:\n%s", out)
	}

	t.Run("a client connected keeps it awake", func(t *testing.T) {
		c, err := client.Dial(ctx, path, client.Options{Name: "idle-test"})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second)
		if s := unitProp(t, svc, "ActiveState"); s != "active" {
			t.Fatalf("controller %s while a client is connected", s)
		}
		c.Close()
	})

	var before protocol.Binding
	var last string // the session file's last entry at hibernation
	t.Run("a tool process alive keeps it awake", func(t *testing.T) {
		fifo := filepath.Join(proj, toolRelease)
		if err := unix.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		before = promptOnce(t, ctx, path, "start a background tool")
		// The tool is a setsid shell blocked in its read (no child of its
		// own): once the bash that started it exits, it is an orphan,
		// the held child's child like the engine, and lives until the
		// test writes its line, however late the check below comes. The
		// policy is 1 s; counted as the engine, the tool was ended by a
		// hibernate 4.5 s after the prompt.
		time.Sleep(6 * time.Second)
		if s := unitProp(t, svc, "ActiveState"); s != "active" || engineScopes(t, id) != 1 {
			t.Fatalf("hibernated with a tool process alive (controller %s)", s)
		}
		// Non-blocking: a tool gone would leave the open waiting for good.
		w, err := os.OpenFile(fifo, os.O_WRONLY|unix.O_NONBLOCK, 0)
		if err != nil {
			t.Fatalf("the tool no longer reads its FIFO: %v", err)
		}
		w.WriteString("go\n")
		w.Close()
	})

	t.Run("idle: hibernates with a proof", func(t *testing.T) {
		hibernated(t, id)
		st := claimOf(t, bin, id)
		if st.Claim == nil || st.Claim.State != claims.Stopped || !st.Claim.Proven || !strings.Contains(st.Claim.Reason, "hibernated") {
			t.Fatalf("claim after hibernate %+v", st.Claim)
		}
		last = lastEntry(t, proj)
	})

	t.Run("the next client wakes it on the same leaf", func(t *testing.T) {
		b, _ := currentBinding(t, ctx, path)
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("the controller's journal:\n%s", run(t, "journalctl", "--user", "-u", svc, "-o", "cat", "--no-pager").stdout)
			}
		})
		waitFor(t, func() bool { b, _ = currentBinding(t, ctx, path); return b.State == protocol.BindingActive })
		if b.Execution == before.Execution || !onLeaf(t, proj, b.Leaf, last) {
			t.Fatalf("woke as %+v; want a new execution on leaf %s, the session's last entry at hibernation (was %s)", b, last, before.Execution)
		}
		after := promptOnce(t, ctx, path, "after the wake")
		if after.Execution != b.Execution {
			t.Fatalf("prompted execution %s, woke %s", after.Execution, b.Execution)
		}
		stdin, _ := os.ReadFile(stdinLog)
		if got := promptsIn(t, stdin); !slices.Equal(got, []string{"start a background tool", "after the wake"}) {
			t.Fatalf("engine prompts %q; nothing may be replayed or lost", got)
		}
	})
}

// TestHibernateAtScale registers MOSAIC_HIBERNATE_N conversations (3 by
// default; docs/recovery.md records a run of 1000) with a 1 s idle policy,
// uses each once (one prompt on the fake Pi) and leaves it; then no
// controller and no engine may be left. It logs the first prompt after a
// wake (connect, wake, prompt, run settled) against one on the warm
// conversation right after: figures, not assertions.
func TestHibernateAtScale(t *testing.T) {
	sandboxtest.Require(t)
	n := 3
	if v, err := strconv.Atoi(os.Getenv("MOSAIC_HIBERNATE_N")); err == nil && v > 0 {
		n = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(n)*3*time.Second+3*time.Minute)
	defer cancel()
	entry, _ := fakeEngine(t, stubmodel.Script{})
	bin := sandboxtest.Bin(t, "mosaicctl")
	mustRun(t, bin, "install")
	t.Cleanup(func() { run(t, bin, "uninstall", "--force") })
	var ids, paths []string
	start := time.Now()
	for i := range n {
		proj, session := project(t, "scale")
		id := strings.TrimSpace(mustRun(t, bin, "conv", "add", "--project", proj, "--seat", "scale", "--session", session,
			"--engine", entry, "--provider", "fakellm", "--model", "fake-model", "--idle-stop", "1s"))
		mustRun(t, "systemctl", "--user", "start", "mosaic-conv@"+id+".socket")
		t.Cleanup(func() {
			run(t, "systemctl", "--user", "stop", "mosaic-conv@"+id+".socket", "mosaic-conv@"+id+".service")
		})
		path, err := units.SocketPath(id)
		if err != nil {
			t.Fatal(err)
		}
		promptOnce(t, ctx, path, fmt.Sprintf("use %d", i))
		ids, paths = append(ids, id), append(paths, path)
	}
	used := time.Since(start)
	deadline := time.Now().Add(time.Minute + time.Duration(n)*50*time.Millisecond)
	var ctls, engines int
	for {
		ctls = strings.Count(run(t, "systemctl", "--user", "list-units", "--plain", "--no-legend", "--state=active", "mosaic-conv@*.service").stdout, ".service")
		engines = strings.Count(run(t, "systemctl", "--user", "list-units", "--plain", "--no-legend", "--state=active", "mosaic-engine-*.scope").stdout, ".scope")
		if ctls == 0 && engines == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if ctls != 0 || engines != 0 {
		t.Fatalf("%d conversations used once and left idle: %d controllers and %d engines still run", n, ctls, engines)
	}
	hib := 0
	for _, id := range ids {
		if st := claimOf(t, bin, id); st.Claim != nil && st.Claim.State == claims.Stopped && st.Claim.Proven {
			hib++
		}
	}
	if hib != n {
		t.Fatalf("%d of %d claims are stopped with a proof", hib, n)
	}
	// The first prompt after a wake, then a warm one on the same
	// conversation, for a few of them.
	var wake, warm []time.Duration
	for i, path := range paths[:min(n, 5)] {
		// Woken again: its engine must end with a proof before the units go.
		t.Cleanup(func() { endConversation(t, bin, ids[i]) })
		t0 := time.Now()
		promptOnce(t, ctx, path, "after the wake")
		wake = append(wake, time.Since(t0))
		t0 = time.Now()
		promptOnce(t, ctx, path, "warm")
		warm = append(warm, time.Since(t0))
	}
	t.Logf("%d conversations used once in %s; then 0 controllers and 0 engines, %d claims stopped with a proof; first prompt after a wake %v, warm %v",
		n, used.Round(time.Millisecond), hib, wake, warm)
}
