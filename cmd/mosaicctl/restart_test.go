package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
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
	"golang.org/x/sys/unix"
)

// Controller restarts (F19): the engine's pipes and a pidfd stay in the
// service manager's fd store, and a restarted controller re-attaches to
// the same engine. These tests restart or kill the controller service of
// a conversation on the fake Pi while a long turn streams.

// longTurn is a script whose first answer streams n chunks, delay ms
// apart, each naming its index, so the session file shows any chunk lost
// or doubled.
func longTurn(n, delay int) (stubmodel.Script, string) {
	var chunks []string
	for i := range n {
		chunks = append(chunks, fmt.Sprintf("c%03d ", i))
	}
	return stubmodel.Script{Turns: []stubmodel.Turn{{Text: chunks, ChunkDelayMS: delay}}}, strings.Join(chunks, "")
}

// enginePIDs returns the processes of the conversation's engine cgroup
// (the engine's own scope, <scope>/engine), sorted.
func enginePIDs(t *testing.T, scope string) []int {
	t.Helper()
	cg := strings.TrimSpace(mustRun(t, "systemctl", "--user", "show", "-p", "ControlGroup", "--value", scope))
	b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", cg, "engine", "cgroup.procs"))
	if err != nil {
		t.Fatalf("engine cgroup of %s: %v", scope, err)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		p, _ := strconv.Atoi(f)
		pids = append(pids, p)
	}
	slices.Sort(pids)
	return pids
}

// currentBinding connects, reads the binding the controller sends after
// the welcome, and returns it with the notices that came with it.
func currentBinding(t *testing.T, ctx context.Context, path string) (protocol.Binding, []protocol.Notice) {
	t.Helper()
	c, err := client.Dial(ctx, path, client.Options{Name: "restart-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var notices []protocol.Notice
	var b *protocol.Binding
	deadline := time.After(30 * time.Second)
	for b == nil || len(notices) == 0 && b.Restart != nil {
		select {
		case u := <-c.Updates():
			switch {
			case u.Binding != nil:
				b = u.Binding
			case u.Notice != nil:
				notices = append(notices, *u.Notice)
			}
		case <-deadline:
			t.Fatalf("no binding (and restart notice) after 30 s: %+v %v", b, notices)
		}
	}
	return *b, notices
}

// sessionFile returns the path of the project's one session file.
func sessionFile(t *testing.T, proj string) string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(proj, ".pi", "state", "*", "sessions", "*.jsonl"))
	if len(files) != 1 {
		t.Fatalf("session files %v; want one", files)
	}
	return files[0]
}

// sessionLines returns the lines of the project's one session file.
func sessionLines(t *testing.T, proj string) []string {
	t.Helper()
	b, err := os.ReadFile(sessionFile(t, proj))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// sessionText returns the assistant text of every message entry of the
// session file, in order.
func sessionText(t *testing.T, proj string) []string {
	t.Helper()
	return messageTexts(sessionLines(t, proj), "assistant")
}

// messageTexts returns the text of every message entry of role among the
// session lines, in order.
func messageTexts(lines []string, role string) []string {
	var out []string
	for _, line := range lines {
		var e struct {
			Type    string
			Message struct {
				Role    string
				Content []struct{ Type, Text string }
			}
		}
		if json.Unmarshal([]byte(line), &e) != nil || e.Type != "message" || e.Message.Role != role {
			continue
		}
		var s strings.Builder
		for _, c := range e.Message.Content {
			s.WriteString(c.Text)
		}
		out = append(out, s.String())
	}
	return out
}

// restartRig is a conversation on the fake Pi with one long turn
// running, a client that prompted it, and the engine's pids.
type restartRig struct {
	bin, id, proj, path, svc, stdinLog, want string
	scope                                    string
	pids                                     []int
}

func startLongTurn(t *testing.T, ctx context.Context, bin, seat string, chunks, delay int) restartRig {
	t.Helper()
	script, want := longTurn(chunks, delay)
	entry, stdinLog := fakeEngine(t, script)
	id, proj, path := startConversation(t, bin, seat, "--engine", entry, "--provider", "fakellm", "--model", "fake-model")
	lib := activeLib(t, ctx, path)
	if _, err := lib.c.Takeover(ctx); err != nil {
		t.Fatal(err)
	}
	if r, err := lib.c.Prompt(ctx, "long"); err != nil || r.State != protocol.ReceiptAcknowledged {
		t.Fatalf("prompt: %v %+v", err, r)
	}
	b := lib.c.State().Binding
	r := restartRig{bin: bin, id: id, proj: proj, path: path, svc: "mosaic-conv@" + id + ".service", stdinLog: stdinLog, want: want, scope: b.Scope}
	r.pids = enginePIDs(t, r.scope)
	return r
}

// settled waits until the binding shows the turn over (engine idle) and
// returns it.
func (r restartRig) settled(t *testing.T, ctx context.Context) protocol.Binding {
	t.Helper()
	for {
		b, _ := currentBinding(t, ctx, r.path)
		if b.EngineState == "idle" || b.State != protocol.BindingActive {
			return b
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the turn never settled: %+v", b)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// check is what every restart must leave: the same engine, the turn
// complete in the session file exactly once, the prompt written once, and
// a conversation that takes the next prompt.
func (r restartRig) check(t *testing.T, ctx context.Context, resumes uint64) {
	t.Helper()
	b := r.settled(t, ctx)
	if b.State != protocol.BindingActive || b.Restart == nil || b.Restart.Resume != resumes {
		t.Fatalf("binding after the restart %+v (restart %+v); want active, resume %d", b, b.Restart, resumes)
	}
	if got := enginePIDs(t, r.scope); !slices.Equal(got, r.pids) {
		t.Fatalf("engine pids %v, before the restart %v: the engine was not kept", got, r.pids)
	}
	if got := sessionText(t, r.proj); !slices.Equal(got, []string{r.want}) {
		t.Fatalf("session file assistant text %q; want exactly the uninterrupted run's %q", got, r.want)
	}
	stdin, _ := os.ReadFile(r.stdinLog)
	if got := promptsIn(t, stdin); !slices.Equal(got, []string{"long"}) {
		t.Fatalf("engine prompts %q; want the one prompt once", got)
	}
	lib := dialLib(t, r.path)
	if _, err := lib.c.Takeover(ctx); err != nil {
		t.Fatal(err)
	}
	if rc, err := lib.c.Prompt(ctx, "after"); err != nil || rc.State != protocol.ReceiptAcknowledged {
		t.Fatalf("prompt after the restart: %v %+v", err, rc)
	}
	waitFor(t, func() bool { return lib.runs() >= 1 })
}

// TestControllerRestartMidStream: `systemctl --user restart` of the
// controller while the engine streams, its binary replaced in place just
// before (an upgrade), leaves the engine running (same
// pids), the turn completes, the session file equals an uninterrupted
// run's, nothing is dispatched twice, and the next client learns of the
// restart and takes control again.
func TestControllerRestartMidStream(t *testing.T) {
	sandboxtest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The units run a copy of mosaicctl that the test may replace.
	exe, err := os.ReadFile(sandboxtest.Bin(t, "mosaicctl"))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "mosaicctl")
	if err := os.WriteFile(bin, exe, 0o755); err != nil {
		t.Fatal(err)
	}
	r := startLongTurn(t, ctx, bin, "alice", 60, 50)
	time.Sleep(500 * time.Millisecond) // mid-stream: the turn runs 3 s
	// An upgrade in place: the unit's binary is replaced (a new file
	// renamed over it, as a package manager does), then restarted.
	if err := os.WriteFile(bin+".upgrade", exe, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(bin+".upgrade", bin); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "systemctl", "--user", "restart", r.svc)
	bd, notices := currentBinding(t, ctx, r.path)
	if b := bd; b.Restart == nil || b.Controller != "" || b.Execution == "" {
		t.Fatalf("binding after restart %+v; want a restart, no controller", b)
	}
	if len(notices) == 0 || notices[0].Kind != protocol.NoticeRestarted {
		t.Fatalf("notices %+v; want %q", notices, protocol.NoticeRestarted)
	}
	r.check(t, ctx, 1)
}

// TestControllerRestartAcrossDaemonReexec: the user manager re-executing
// itself (`systemctl --user daemon-reexec`) mid-turn serialises the fd
// store; a controller restarted after it still re-attaches.
func TestControllerRestartAcrossDaemonReexec(t *testing.T) {
	sandboxtest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := startLongTurn(t, ctx, sandboxtest.Bin(t, "mosaicctl"), "alice", 80, 50)
	time.Sleep(500 * time.Millisecond)
	mustRun(t, "systemctl", "--user", "daemon-reexec")
	if b, _ := currentBinding(t, ctx, r.path); b.Restart != nil || b.State != protocol.BindingActive {
		t.Fatalf("after daemon-reexec the controller itself must still run: %+v", b)
	}
	mustRun(t, "systemctl", "--user", "restart", r.svc)
	r.check(t, ctx, 1)
}

// fastRestart installs a drop-in for this test only: controllers restart
// at once and without a start limit, so tests that kill them on purpose,
// hundreds of times, fit in CI's budget.
func fastRestart(t *testing.T) {
	t.Helper()
	dropin := filepath.Join(os.Getenv("HOME"), ".config", "systemd", "user", "mosaic-conv@.service.d")
	if err := os.MkdirAll(dropin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dropin, "test-fast-restart.conf"), []byte("[Unit]\nStartLimitIntervalSec=0\n[Service]\nRestartSec=10ms\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.RemoveAll(dropin)
		run(t, "systemctl", "--user", "daemon-reload")
	})
	mustRun(t, "systemctl", "--user", "daemon-reload")
}

// TestControllerKilledAtRandom: SIGKILL of the controller at random
// points of a long turn, again and again (MOSAIC_RESTART_KILLS times, 5
// by default): after each the restarted controller re-attaches, and at
// the end the turn is whole and was dispatched once.
func TestControllerKilledAtRandom(t *testing.T) {
	sandboxtest.Require(t)
	kills := 5
	if n, err := strconv.Atoi(os.Getenv("MOSAIC_RESTART_KILLS")); err == nil && n > 0 {
		kills = n
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(kills)*20*time.Second+2*time.Minute)
	defer cancel()
	fastRestart(t)
	r := startLongTurn(t, ctx, sandboxtest.Bin(t, "mosaicctl"), "alice", 40*kills, 25)
	start, midTurn := time.Now(), 0
	for i := range kills {
		time.Sleep(time.Duration(rand.IntN(400)) * time.Millisecond)
		mustRun(t, "systemctl", "--user", "kill", "--signal=KILL", r.svc)
		b, _ := currentBinding(t, ctx, r.path)
		if b.Restart == nil || b.Restart.Resume != uint64(i+1) || b.State != protocol.BindingActive {
			t.Fatalf("kill %d: binding %+v restart %+v", i+1, b, b.Restart)
		}
		if b.Restart.RunInProgress {
			midTurn++
		}
	}
	r.check(t, ctx, uint64(kills))
	t.Logf("%d SIGKILLs of the controller (%d with the run in progress) in %s; the engine and the turn survived each", kills, midTurn, time.Since(start).Round(time.Millisecond))
	if midTurn == 0 {
		t.Fatal("no kill landed mid-turn: the test proved nothing")
	}
}

// TestControllerRestartMidTool: on the real Pi, `systemctl --user
// restart` of the controller while the agent's bash tool runs leaves the
// engine and its tool running; the tool's result and the answer after it
// reach the session file once, and the engine's processes after the turn
// are the ones before it.
func TestControllerRestartMidTool(t *testing.T) {
	sandboxtest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pc := realPiConversation(t, "restart-tool", stubmodel.Script{Turns: []stubmodel.Turn{
		{Text: []string{"Running it. "}, Tool: &stubmodel.ToolCall{Command: "sleep 3; echo tool-done"}},
		{Text: []string{"The tool ", "said done."}},
	}})
	lib := activeLib(t, ctx, pc.path)
	scope := lib.c.State().Binding.Scope
	before := enginePIDs(t, scope)
	if _, err := lib.c.Takeover(ctx); err != nil {
		t.Fatal(err)
	}
	if r, err := lib.c.Prompt(ctx, "run the tool"); err != nil || r.State != protocol.ReceiptAcknowledged {
		t.Fatalf("prompt: %v %+v", err, r)
	}
	waitFor(t, func() bool { return strings.Contains(strings.Join(lib.lines(), "\n"), "[tool bash running]") })
	mustRun(t, "systemctl", "--user", "restart", "mosaic-conv@"+pc.id+".service")
	b, _ := currentBinding(t, ctx, pc.path)
	if b.Restart == nil || !b.Restart.RunInProgress || b.State != protocol.BindingActive {
		t.Fatalf("binding after a restart mid-tool %+v (restart %+v); want active with a run in progress", b, b.Restart)
	}
	r := restartRig{path: pc.path}
	if b := r.settled(t, ctx); b.State != protocol.BindingActive || b.EngineState != "idle" {
		t.Fatalf("after the turn: %+v", b)
	}
	if got := enginePIDs(t, scope); !slices.Equal(got, before) {
		t.Fatalf("engine pids %v after the turn, %v before it", got, before)
	}
	if got, want := sessionText(t, pc.proj), []string{"Running it. ", "The tool said done."}; !slices.Equal(got, want) {
		t.Fatalf("session assistant text %q; want %q", got, want)
	}
	if b := strings.Join(sessionLines(t, pc.proj), "\n"); strings.Count(b, `"role":"toolResult"`) != 1 {
		t.Fatalf("the tool's result is in the session file %d times; want once:\n%s", strings.Count(b, `"role":"toolResult"`), b)
	}
}

// bindingReaches connects now and returns a channel closed once a
// binding broadcast shows state.
func bindingReaches(t *testing.T, ctx context.Context, path, state string) <-chan struct{} {
	t.Helper()
	c, err := client.Dial(ctx, path, client.Options{Name: "restart-watch"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ch := make(chan struct{})
	go func() {
		for u := range c.Updates() {
			if u.Binding != nil && u.Binding.State == state {
				close(ch)
				for range c.Updates() {
				}
				return
			}
		}
	}()
	return ch
}

// claimOf reads the conversation's claim as `mosaicctl status --json`
// shows it.
func claimOf(t *testing.T, bin, id string) (st convStatus) {
	t.Helper()
	if err := json.Unmarshal([]byte(mustRun(t, bin, "status", "--json", id)), &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// startTool takes control of the active conversation at path and
// prompts it to start its script's tool, returning once the tool runs.
func startTool(t *testing.T, ctx context.Context, path string) {
	t.Helper()
	lib := activeLib(t, ctx, path)
	if _, err := lib.c.Takeover(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := lib.c.Prompt(ctx, "start the tool"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return lib.runs() >= 1 })
}

// TestControllerRestartMidForceStop: a controller restarted
// (`systemctl --user restart`) or killed (SIGKILL) while a confirmed force
// stop is in its TERM phase never leaves the stop stopped without a proof:
// the graceful restart finishes the stop before it exits, the killed one's
// successor resumes it (K10), and either way the claim ends stopped with a
// proof that verifies, or uncertain, and no descriptor of the dead engine
// is re-attached.
func TestControllerRestartMidForceStop(t *testing.T) {
	sandboxtest.Require(t)
	for _, how := range []string{"restart", "kill"} {
		t.Run(how, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			// A tool's child that ignores SIGTERM (and left the tool's
			// process group, so no abort reaches it) keeps the stop in its
			// TERM phase for the whole grace.
			entry, _ := fakeEngine(t, stubmodel.Script{Turns: []stubmodel.Turn{
				{Text: []string{"ok "}, Tool: &stubmodel.ToolCall{Command: "setsid sh -c \"trap '' TERM; sleep 120\" >/dev/null 2>&1 & sleep 0.5; echo trapped"}},
				{Text: []string{"done"}},
			}})
			bin := sandboxtest.Bin(t, "mosaicctl")
			id, _, path := startConversation(t, bin, "stop-"+how, "--engine", entry, "--provider", "fakellm", "--model", "fake-model")
			svc := "mosaic-conv@" + id + ".service"
			startTool(t, ctx, path)
			stopping := bindingReaches(t, ctx, path, protocol.BindingStopping)
			stop := exec.CommandContext(ctx, bin, "stop", "--take", "--yes", "--timeout", "1m", id)
			var stopOut strings.Builder
			stop.Stdout, stop.Stderr = &stopOut, &stopOut
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("mosaicctl stop: %s", stopOut.String())
				}
			})
			if err := stop.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { stop.Wait() })
			select {
			case <-stopping:
			case <-ctx.Done():
				t.Fatal("the binding never showed the stop")
			}
			// The binding says stopping once the claim does (killCohort);
			// the claim is the successor's premise, so it is read too.
			for st := claimOf(t, bin, id); st.Claim == nil || st.Claim.State != claims.Stopping; st = claimOf(t, bin, id) {
				select {
				case <-ctx.Done():
					t.Fatalf("the claim never recorded the stop: %+v", st.Claim)
				case <-time.After(50 * time.Millisecond):
				}
			}
			if how == "restart" {
				mustRun(t, "systemctl", "--user", "restart", svc)
			} else {
				mustRun(t, "systemctl", "--user", "kill", "--signal=KILL", svc)
			}
			var st convStatus
			for {
				st = claimOf(t, bin, id)
				if st.Claim != nil && (st.Claim.State == claims.Stopped || st.Claim.State == claims.Uncertain) {
					break
				}
				select {
				case <-ctx.Done():
					t.Fatalf("the stop never ended: %+v", st.Claim)
				case <-time.After(200 * time.Millisecond):
				}
			}
			if st.Claim.State == claims.Stopped && !st.Claim.Proven {
				t.Fatalf("claim stopped without a proof that verifies: %+v", st.Claim)
			}
			if st.Claim.State != claims.Stopped {
				t.Logf("the stop ended uncertain: %s", st.Claim.Reason)
			}
			b, _ := currentBinding(t, ctx, path)
			if b.Restart != nil || b.EngineState == "idle" || b.EngineState == "busy" {
				t.Fatalf("after the stop a controller re-attached to the dead engine: %+v", b)
			}
		})
	}
}

// TestRestartedControllerKeepsTheGrace: a force stop by a controller
// that was restarted (`systemctl --user restart`: it re-attached through
// the fd store) still gives a confined engine's tools their grace (Q8),
// through the held child's stop pipe kept with the engine's pipes. A tool
// that takes 300 ms in its SIGTERM handler writes its file before it
// ends; without the pipe the engine's pid namespace ends with the engine
// and SIGKILLs it inside the handler.
func TestRestartedControllerKeepsTheGrace(t *testing.T) {
	sandboxtest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	entry, _ := fakeEngine(t, stubmodel.Script{Turns: []stubmodel.Turn{
		{Text: []string{"ok "}, Tool: &stubmodel.ToolCall{Command: `setsid sh -c 'trap "sleep 0.3; echo done > graced; exit 0" TERM; : > armed; while :; do sleep 0.05; done' >/dev/null 2>&1 & echo started`}},
		{Text: []string{"done"}},
	}})
	bin := sandboxtest.Bin(t, "mosaicctl")
	id, proj, path := startConversation(t, bin, "grace-restart", "--engine", entry, "--provider", "fakellm", "--model", "fake-model")
	startTool(t, ctx, path)
	r := restartRig{path: path}
	if b := r.settled(t, ctx); b.State != protocol.BindingActive {
		t.Fatalf("after the turn: %+v", b)
	}
	waitFor(t, func() bool { _, err := os.Stat(filepath.Join(proj, "armed")); return err == nil })
	mustRun(t, "systemctl", "--user", "restart", "mosaic-conv@"+id+".service")
	if b := r.settled(t, ctx); b.State != protocol.BindingActive || b.Restart == nil {
		t.Fatalf("after the restart: %+v (restart %+v); want active, re-attached", b, b.Restart)
	}
	mustRun(t, bin, "stop", "--take", "--yes", "--timeout", "1m", id)
	if b, err := os.ReadFile(filepath.Join(proj, "graced")); err != nil || strings.TrimSpace(string(b)) != "done" {
		t.Fatalf("the tool's SIGTERM handler did not finish (%q, %v): the restarted controller's stop cut its grace short", b, err)
	}
}

// TestStoppedEngineLeavesNothingKept: once a force stop ended the engine,
// the controller dropped its descriptors from the fd store
// (FDSTOREREMOVE): a controller restarted afterwards receives none, so
// it has nothing of a dead engine to drop, let alone re-attach to. (On
// Linux >= 6.9 the manager drops a reaped engine's pidfd by itself too, so
// there this holds even without FDSTOREREMOVE; mutant 35 is killed by
// scopes.TestResumeProvesTheEngine instead.)
func TestStoppedEngineLeavesNothingKept(t *testing.T) {
	sandboxtest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	entry, _ := fakeEngine(t, stubmodel.Script{})
	bin := sandboxtest.Bin(t, "mosaicctl")
	id, _, path := startConversation(t, bin, "kept", "--engine", entry, "--provider", "fakellm", "--model", "fake-model")
	svc := "mosaic-conv@" + id + ".service"
	activeLib(t, ctx, path)
	mustRun(t, bin, "stop", "--take", "--yes", "--timeout", "1m", id)
	mustRun(t, "systemctl", "--user", "restart", svc)
	b, _ := currentBinding(t, ctx, path)
	if b.State != protocol.BindingStopped || b.Restart != nil {
		t.Fatalf("after a proven stop and a restart: %+v", b)
	}
	for _, e := range journal(t, "-u", svc) {
		if _, ok := e["MOSAIC_EXECUTIONS"]; ok {
			t.Fatalf("the restarted controller received descriptors of the stopped engine: %v", e["MESSAGE"])
		}
	}
}

// TestRestartAfterForeignAppend: an entry another writer appends to the
// session file while no controller watches (between a crash and the
// restart) is caught when the restarted controller re-attaches: the
// binding is uncertain, admission closed, nothing is written to the
// engine after the re-attachment's own checks.
func TestRestartAfterForeignAppend(t *testing.T) {
	foreignWhileDown(t, func(t *testing.T, r restartRig, session string) {
		last := lastEntry(t, r.proj)
		f, err := os.OpenFile(session, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(f, `{"type":"message","id":"foreign01","parentId":%q,"timestamp":"2026-12-03T00:00:00.000Z","message":{"role":"user","content":[{"type":"text","text":"someone else"}],"timestamp":0}}`+"\n", last)
		f.Close()
	})
}

// TestRestartAfterForeignRewrite: a user message another writer rewrites
// in place in the session file while no controller watches (its id, the
// leaf and the file's size kept) is caught when the restarted controller
// re-attaches, as an append is.
func TestRestartAfterForeignRewrite(t *testing.T) {
	foreignWhileDown(t, func(t *testing.T, _ restartRig, session string) {
		orig, err := os.ReadFile(session)
		if err != nil {
			t.Fatal(err)
		}
		forged := bytes.Replace(orig, []byte(`"text":"long"`), []byte(`"text":"LONG"`), 1)
		if bytes.Equal(forged, orig) {
			t.Fatalf("the prompt is not in the session file:\n%s", orig)
		}
		f, err := os.OpenFile(session, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteAt(forged, 0)
		f.Close()
	})
}

// foreignWhileDown kills a conversation's controller after a settled
// turn, lets write change the session file before Restart=on-failure
// brings the controller back (after RestartSec, 1 s), and requires the
// restarted controller to re-attach uncertain, admission closed for a
// foreign writer.
func foreignWhileDown(t *testing.T, write func(t *testing.T, r restartRig, session string)) {
	t.Helper()
	sandboxtest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := startLongTurn(t, ctx, sandboxtest.Bin(t, "mosaicctl"), "alice", 10, 20)
	r.settled(t, ctx)
	session := sessionFile(t, r.proj)
	mustRun(t, "systemctl", "--user", "kill", "--signal=KILL", r.svc)
	write(t, r, session)
	var b protocol.Binding
	waitFor(t, func() bool { b, _ = currentBinding(t, ctx, r.path); return b.State != protocol.BindingLaunching })
	if b.State != protocol.BindingUncertain || b.Admission != protocol.AdmissionClosed || b.Restart == nil {
		t.Fatalf("after a foreign write while the controller was down: %+v (restart %+v); want uncertain, closed, re-attached", b, b.Restart)
	}
	if !strings.Contains(b.AdmissionReason, "foreign") {
		t.Fatalf("admission reason %q; want it to name the foreign writer", b.AdmissionReason)
	}
}

// TestRestartAfterEngineDied: an engine that dies while no controller
// runs is never re-attached to, whatever the fd store still holds: the
// restarted controller classifies the claim as before (the cohort
// observed, never stopped without a proof).
func TestRestartAfterEngineDied(t *testing.T) {
	sandboxtest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := startLongTurn(t, ctx, sandboxtest.Bin(t, "mosaicctl"), "alice", 200, 20)
	mustRun(t, "systemctl", "--user", "kill", "--signal=KILL", r.svc)
	for _, p := range r.pids {
		unix.Kill(p, unix.SIGKILL)
	}
	var b protocol.Binding
	waitFor(t, func() bool {
		b, _ = currentBinding(t, ctx, r.path)
		return b.State != protocol.BindingLaunching && b.State != protocol.BindingStopping
	})
	if b.Restart != nil || b.State == protocol.BindingActive {
		t.Fatalf("re-attached to a dead engine: %+v (restart %+v)", b, b.Restart)
	}
	if v := soakInvariants(t, r.bin, r.id, r.proj); len(v) > 0 {
		t.Fatalf("after the restart: %v", v)
	}
}
