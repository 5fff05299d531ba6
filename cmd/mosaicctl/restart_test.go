package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/client"
	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
	"github.com/mosaic-agents/mosaic/protocol"
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

// sessionText returns the assistant text of every message entry of the
// session file, in order.
func sessionText(t *testing.T, proj string) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(proj, ".pi", "state", "*", "sessions", "*.jsonl"))
	if len(files) != 1 {
		t.Fatalf("session files %v; want one", files)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e struct {
			Type    string
			Message struct {
				Role    string
				Content []struct{ Type, Text string }
			}
		}
		if json.Unmarshal([]byte(line), &e) != nil || e.Type != "message" || e.Message.Role != "assistant" {
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

func startLongTurn(t *testing.T, ctx context.Context, seat string, chunks, delay int) restartRig {
	t.Helper()
	script, want := longTurn(chunks, delay)
	entry, stdinLog := fakeEngine(t, script)
	bin := sandboxtest.Bin(t, "mosaicctl")
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
// controller while the engine streams leaves the engine running (same
// pids), the turn completes, the session file equals an uninterrupted
// run's, nothing is dispatched twice, and the next client learns of the
// restart and takes control again.
func TestControllerRestartMidStream(t *testing.T) {
	sandboxtest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := startLongTurn(t, ctx, "alice", 60, 50)
	time.Sleep(500 * time.Millisecond) // mid-stream: the turn runs 3 s
	mustRun(t, "systemctl", "--user", "restart", r.svc)
	b, notices := currentBinding(t, ctx, r.path)
	if b.Restart == nil || b.Controller != "" || b.Execution == "" {
		t.Fatalf("binding after restart %+v; want a restart, no controller", b)
	}
	if len(notices) == 0 || notices[0].Kind != protocol.NoticeRestarted {
		t.Fatalf("notices %+v; want %q", notices, protocol.NoticeRestarted)
	}
	r.check(t, ctx, 1)
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
	r := startLongTurn(t, ctx, "alice", 40*kills, 25)
	for i := range kills {
		time.Sleep(time.Duration(rand.IntN(400)) * time.Millisecond)
		mustRun(t, "systemctl", "--user", "kill", "--signal=KILL", r.svc)
		// Restart= brings it back; the start limit must not stop a test
		// that kills on purpose.
		run(t, "systemctl", "--user", "reset-failed", r.svc)
		b, _ := currentBinding(t, ctx, r.path)
		if b.Restart == nil || b.Restart.Resume != uint64(i+1) || b.State != protocol.BindingActive {
			t.Fatalf("kill %d: binding %+v restart %+v", i+1, b, b.Restart)
		}
	}
	r.check(t, ctx, uint64(kills))
	t.Logf("%d SIGKILLs of the controller mid-turn; the engine and the turn survived each", kills)
}
