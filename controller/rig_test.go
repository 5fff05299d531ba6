package controller

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/activation"
	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/contrib/attack"
	"github.com/mosaic-agents/mosaic/contrib/fakepi"
	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/engine/pi"
	"github.com/mosaic-agents/mosaic/scopes"
)

// TestMain lets the scope launcher re-execute this test binary as its
// held child and anchor.
func TestMain(m *testing.M) {
	scopes.MaybeRunHeld()
	attack.MaybeRun()
	os.Exit(m.Run())
}

// rig is a controller in this process over a fake Pi in a real scope of
// the sandbox's user manager, served on a socket in a temp directory.
type rig struct {
	t        testing.TB
	ctrl     *Controller
	sock     string
	stdin    string // the fake engine's exact stdin bytes
	session  string
	seslog   string // the fake engine's own session-file writes
	control  string // fake Pi pause points
	audit    *syncBuffer
	cfg      Config
	ctx      context.Context    // the serving context
	cancel   context.CancelFunc // shuts the server down, as SIGTERM does
	served   chan struct{}      // closed when Serve returned
	serveErr error              // what Serve returned, once served is closed
}

func newRig(t testing.TB, script string, mutate func(*Config)) *rig {
	t.Helper()
	sandboxtest.Require(t)
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return newRigAt(t, dir, script, mutate, nil)
}

// newRigAt is newRig in dir, which may hold what an earlier controller
// left (a crashed one's claims and queue); hook, if set, installs test
// hooks before Start.
func newRigAt(t testing.TB, dir, script string, mutate func(*Config), hook func(*Controller)) *rig {
	t.Helper()
	return newRigWith(t, dir, script, mutate, hook, nil)
}

// newRigWith is newRigAt; with a gate it serves before starting, as
// `mosaicctl serve` does, and leaves Start and gate.Open to the test.
func newRigWith(t testing.TB, dir, script string, mutate func(*Config), hook func(*Controller), gate *StartGate) *rig {
	t.Helper()
	sandboxtest.Require(t) // the engine runs in a scope of the user manager
	fake := sandboxtest.Bin(t, "fakepi")
	project := filepath.Join(dir, "proj")
	if err := os.MkdirAll(filepath.Join(project, ".pi", "state", "alice", "sessions"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, sock: filepath.Join(dir, "c.sock"), stdin: filepath.Join(dir, "stdin.log"),
		seslog: filepath.Join(dir, "session.log"), control: filepath.Join(dir, "fake.ctl"), audit: &syncBuffer{}}
	scriptPath := filepath.Join(dir, "script.json")
	if err := os.WriteFile(scriptPath, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	cv := &conversations.Conversation{Project: project, Seat: "alice", Workspace: "default",
		Session: conversations.SessionPath(project, "alice", "main.jsonl")}
	cv.ID = conversations.ID(project, "alice", "main.jsonl")
	r.session = cv.Session
	store, err := claims.Open(filepath.Join(dir, "state", "claims"))
	if err != nil {
		t.Fatal(err)
	}
	mgr := scopes.NewManager(scopes.Config{})
	t.Cleanup(mgr.Close)
	cfg := Config{Conversation: cv, Claims: store, Scopes: mgr, Audit: audit.NewWriter(cv.ID, r.audit),
		Grace: 200 * time.Millisecond, CommandTimeout: 5 * time.Second, AbortTimeout: 5 * time.Second,
		PollInterval: 100 * time.Millisecond,
		Spec: func(cv *conversations.Conversation) (engine.Spec, error) {
			args, err := pi.Seal{Session: cv.Session, Provider: "fakellm", Model: "fake-model"}.Args()
			if err != nil {
				return engine.Spec{}, err
			}
			env := append(pi.Environ(os.Environ()), "FAKEPI_SCRIPT="+scriptPath, "FAKEPI_STDIN_LOG="+r.stdin,
				"FAKEPI_SESSION_LOG="+r.seslog, "FAKEPI_CONTROL="+r.control)
			return engine.Spec{Path: fake, Args: append([]string{fake}, args...), Env: env, Dir: cv.Project}, nil
		}}
	if mutate != nil {
		mutate(&cfg)
	}
	r.cfg = cfg
	r.ctrl = New(cfg)
	if hook != nil {
		hook(r.ctrl)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if gate == nil {
		if err := r.ctrl.Start(ctx); err != nil {
			t.Fatalf("Start: %v", err)
		}
	}
	l, err := activation.Listen(r.sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &Server{Conversation: cv.ID, Version: "mosaic/test", UID: os.Getuid(), Audit: cfg.Audit, Controller: r.ctrl, Started: gate}
	done := make(chan struct{})
	go func() { r.serveErr = srv.Serve(ctx, l); close(done) }()
	r.ctx, r.cancel, r.served = ctx, cancel, done
	t.Cleanup(func() {
		r.killAll()
		cancel()
		<-done
		r.ctrl.Close()
	})
	return r
}

// killAll ends the engine's scope whatever the test left, so no fake
// outlives its test.
func (r *rig) killAll() {
	r.ctrl.mu.Lock()
	x := r.ctrl.st.exec
	live := x != nil && x.handle != nil && !x.exited
	r.ctrl.mu.Unlock()
	if !live {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	x.handle.Kill(ctx, scopes.StopOptions{Stop: "test-cleanup"})
	if x.conn == nil {
		// An orphan found at restart: nothing watches its exit.
		r.ctrl.writes.Wait()
		return
	}
	// The exit watcher may record uncertain in the claim: let it finish
	// before the temp directory goes (it queues that write under mu, with
	// exited).
	for ctx.Err() == nil && !r.gone(x) {
		sleep20()
	}
	r.ctrl.writes.Wait()
}

// gone reports whether the controller saw x's engine exit.
func (r *rig) gone(x *execution) bool {
	r.ctrl.mu.Lock()
	defer r.ctrl.mu.Unlock()
	return x.exited
}

// stdinBytes returns what the engine read on stdin so far.
func (r *rig) stdinBytes() string {
	b, _ := os.ReadFile(r.stdin)
	return string(b)
}

// prompts counts prompt records the engine received.
func (r *rig) prompts() int { return strings.Count(r.stdinBytes(), `"type":"prompt"`) }

func (r *rig) fakeControl() *fakepi.Control {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fc, err := fakepi.DialControl(ctx, r.control)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { fc.Close() })
	return fc
}

// peer is a raw protocol client: it sends lines and collects records.
type peer struct {
	t    testing.TB
	c    net.Conn
	recs chan map[string]any
	id   string
}

func (r *rig) dial() *peer {
	r.t.Helper()
	c, err := net.Dial("unix", r.sock)
	if err != nil {
		r.t.Fatal(err)
	}
	k := &peer{t: r.t, c: c, recs: make(chan map[string]any, 4096)}
	r.t.Cleanup(func() { c.Close() })
	go func() {
		sc := bufio.NewScanner(c)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				k.recs <- m
			}
		}
		close(k.recs)
	}()
	k.send(map[string]any{"type": "hello", "client": "test"})
	w := k.await(func(m map[string]any) bool { return m["record"] == "welcome" })
	k.id = w["connection"].(string)
	return k
}

func (k *peer) send(v map[string]any) {
	k.t.Helper()
	b, _ := json.Marshal(v)
	if _, err := k.c.Write(append(b, '\n')); err != nil {
		k.t.Fatalf("write: %v", err)
	}
}

// await returns the first record matching pred, failing after a bound.
func (k *peer) await(pred func(map[string]any) bool) map[string]any {
	k.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case m, ok := <-k.recs:
			if !ok {
				k.t.Fatal("connection closed while waiting")
			}
			if pred(m) {
				return m
			}
		case <-deadline:
			k.t.Fatal("no matching record within the bound")
		}
	}
}

// reply sends a command and returns its final record (the one carrying
// its request id), refusal or not.
func (k *peer) reply(cmd map[string]any) map[string]any {
	k.t.Helper()
	k.send(cmd)
	req := cmd["request"]
	return k.await(func(m map[string]any) bool {
		return m["request"] == req && m["record"] != "stop" && m["record"] != "binding"
	})
}

func (k *peer) must(cmd map[string]any, record string) map[string]any {
	k.t.Helper()
	m := k.reply(cmd)
	if m["record"] != record {
		k.t.Fatalf("%v: got %v, want a %s", cmd["type"], m, record)
	}
	return m
}

func (k *peer) refused(cmd map[string]any, code string) map[string]any {
	k.t.Helper()
	m := k.reply(cmd)
	if m["record"] != "refusal" || m["code"] != code {
		k.t.Fatalf("%v: got %v, want refusal %s", cmd["type"], m, code)
	}
	return m
}

// binding waits for the controller to report a binding state.
func (r *rig) waitBinding(state string) map[string]any {
	r.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r.ctrl.mu.Lock()
		b := r.ctrl.bindingLocked()
		r.ctrl.mu.Unlock()
		if b.State == state {
			raw, _ := json.Marshal(b)
			var m map[string]any
			json.Unmarshal(raw, &m)
			return m
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("binding is %s (%s), want %s", b.State, b.AdmissionReason, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (r *rig) generation() float64 {
	r.ctrl.mu.Lock()
	defer r.ctrl.mu.Unlock()
	return float64(r.ctrl.st.generation)
}

func (r *rig) execution() string {
	r.ctrl.mu.Lock()
	defer r.ctrl.mu.Unlock()
	if r.ctrl.st.exec == nil {
		return ""
	}
	return r.ctrl.st.exec.id
}

// takeover makes k the controller and returns the new generation.
func (r *rig) takeover(k *peer) float64 {
	r.t.Helper()
	m := k.must(map[string]any{"type": "takeover", "request": newID("t-"), "generation": r.generation()}, "control")
	return m["generation"].(float64)
}

// confirm issues and answers a confirmation for op.
func (k *peer) confirm(op string, gen float64) string {
	k.t.Helper()
	cf := k.must(map[string]any{"type": "issue-confirmation", "request": newID("ci-"), "operation": op, "generation": gen}, "confirmation")
	id := cf["id"].(string)
	k.must(map[string]any{"type": "answer-confirmation", "request": newID("ca-"), "confirmation": id, "answer": "confirm"}, "confirmation")
	return id
}

// settled waits for a run-settled event on k.
func (k *peer) settled() {
	k.t.Helper()
	k.await(func(m map[string]any) bool { return m["record"] == "event" && m["kind"] == "run-settled" })
}

func sleep20() { time.Sleep(20 * time.Millisecond) }

// abortHeldTurn makes ctl the observing controller of an endless turn
// that is streaming, and arms the fake's abort-received pause point, so
// the next interrupt's abort hangs until released. It returns the
// generation.
func (r *rig) abortHeldTurn(ctx context.Context, fc *fakepi.Control, ctl *peer) float64 {
	r.t.Helper()
	ctl.must(map[string]any{"type": "observe", "request": newID("o-")}, "observed")
	gen := r.takeover(ctl)
	ctl.must(map[string]any{"type": "prompt", "request": newID("p-"), "generation": gen, "text": "go"}, "receipt")
	ctl.await(func(m map[string]any) bool { return m["kind"] == "text-delta" })
	if err := fc.Arm(ctx, "abort-received"); err != nil {
		r.t.Fatal(err)
	}
	return gen
}
