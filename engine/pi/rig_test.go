package pi

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/contrib/fakepi"
	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/protocol"
)

// rig runs the adapter against an engine process: the fake Pi
// (contrib/fakepi, in process) or the real pinned Pi (MOSAIC_PI, driven by
// the contrib/stubmodel server). The same tests run on both.
type rig struct {
	t       *testing.T
	conn    *Conn
	real    bool
	gate    *gate
	stdin   *tee
	mu      sync.Mutex
	events  []protocol.Event
	evWake  chan struct{}
	control *fakepi.Control
}

// engines lists the engines a conformance test runs on. The real Pi is
// skipped with a reason when MOSAIC_PI is unset, and fails under CI=true.
func engines(t *testing.T) []string {
	t.Helper()
	list := []string{"fake"}
	if os.Getenv("MOSAIC_PI") != "" {
		list = append(list, "real")
	}
	return list
}

func realPiNote(t *testing.T) {
	t.Helper()
	if os.Getenv("MOSAIC_PI") == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true needs MOSAIC_PI pointing at the pinned pi (contrib/pi/install.sh)")
		}
		t.Log("real Pi not run: MOSAIC_PI is unset (set it to the pinned pi from contrib/pi/install.sh)")
	}
}

// startRig starts engine ("fake" or "real") with script.
func startRig(t *testing.T, engine string, script stubmodel.Script, opts engine.Options, control bool) *rig {
	t.Helper()
	dir := t.TempDir()
	session := filepath.Join(dir, "sessions", "s1.jsonl")
	must(t, os.MkdirAll(filepath.Dir(session), 0o755))
	agentDir := filepath.Join(dir, "agent")
	ctx, cancel := context.WithCancel(context.Background())

	baseURL := "http://127.0.0.1:9/v1"
	if engine == "real" {
		srv, err := stubmodel.Start(script)
		must(t, err)
		t.Cleanup(func() { srv.Close() })
		baseURL = srv.BaseURL()
	}
	model, err := stubmodel.WriteAgentDir(agentDir, baseURL)
	must(t, err)
	seal := Seal{Session: session, Provider: model.Provider, Model: model.Model}

	stdinR, stdinW := io.Pipe()
	stdoutR, stdoutW := io.Pipe()
	done := make(chan struct{})
	r := &rig{t: t, real: engine == "real", evWake: make(chan struct{}, 1)}
	switch engine {
	case "fake":
		scriptPath := filepath.Join(dir, "script.json")
		must(t, stubmodel.WriteScript(scriptPath, script))
		args, err := seal.Args()
		must(t, err)
		env := map[string]string{
			fakepi.EnvScript: scriptPath, fakepi.EnvAgentDir: agentDir,
			fakepi.EnvRetryDelay: "300",
		}
		if control {
			env[fakepi.EnvControl] = filepath.Join(dir, "control.sock")
		}
		go func() {
			defer close(done)
			fakepi.Main(args, func(k string) string { return env[k] }, stdinR, stdoutW, io.Discard)
			stdoutW.Close()
		}()
		if control {
			var c *fakepi.Control
			deadline := time.Now().Add(5 * time.Second)
			for {
				c, err = fakepi.DialControl(ctx, env[fakepi.EnvControl])
				if err == nil || time.Now().After(deadline) {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			must(t, err)
			r.control = c
			t.Cleanup(func() { c.Close() })
		}
	case "real":
		// The pin's manifest cache, out of the caller's own state
		// directory: outside the sandbox these tests run as the caller.
		t.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state"))
		pin, err := Resolve(os.Getenv("MOSAIC_PI"), ResolveOptions{PATH: os.Getenv("PATH")})
		must(t, err)
		home := filepath.Join(dir, "home")
		must(t, os.MkdirAll(home, 0o755))
		environ := append(slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "HOME=") }), "HOME="+home)
		spec, err := Command(Config{Pin: pin, Seal: seal, AgentDir: agentDir, ProjectRoot: dir}, environ)
		must(t, err)
		cmd := &exec.Cmd{Path: spec.Path, Args: spec.Args}
		cmd.Env, cmd.Dir = spec.Env, spec.Dir
		cmd.Stdin, cmd.Stdout = stdinR, stdoutW
		cmd.Stderr = os.Stderr
		cmd.ExtraFiles, err = spec.Handed()
		must(t, err)
		t.Cleanup(func() { closeFiles(cmd.ExtraFiles) })
		must(t, cmd.Start())
		go func() {
			defer close(done)
			cmd.Wait()
			stdoutW.Close()
		}()
	}
	r.gate = newGate(stdoutR)
	r.stdin = &tee{w: stdinW}
	if opts.Execution == "" {
		opts.Execution = "exec-" + engine
	}
	r.conn, err = New(r.gate, r.stdin, opts)
	must(t, err)
	evDone := make(chan struct{})
	go func() {
		defer close(evDone)
		for e := range r.conn.Events() {
			r.mu.Lock()
			r.events = append(r.events, e)
			r.mu.Unlock()
			select {
			case r.evWake <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		r.gate.open()
		r.conn.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("engine did not exit at stdin EOF")
		}
		<-evDone
		cancel()
	})
	return r
}

// waitEvent waits for an event matching ok and returns it.
func (r *rig) waitEvent(ok func(protocol.Event) bool) protocol.Event {
	r.t.Helper()
	deadline := time.After(20 * time.Second)
	seen := 0
	for {
		r.mu.Lock()
		evs := r.events[seen:]
		r.mu.Unlock()
		for _, e := range evs {
			seen++
			if ok(e) {
				return e
			}
		}
		select {
		case <-r.evWake:
		case <-deadline:
			r.t.Fatalf("event not seen; have %d events", seen)
		}
	}
}

func (r *rig) snapshot() []protocol.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]protocol.Event(nil), r.events...)
}

func kind(k protocol.EventKind) func(protocol.Event) bool {
	return func(e protocol.Event) bool { return e.Kind == k }
}

// stdinTypes returns the command types written to the engine, in order.
func (r *rig) stdinTypes() []string {
	var out []string
	for _, line := range strings.Split(strings.TrimSuffix(r.stdin.String(), "\n"), "\n") {
		n, err := decodeLine([]byte(line))
		if err == nil {
			out = append(out, n.Type)
		}
	}
	return out
}

// tee records every byte written to the engine's stdin.
type tee struct {
	mu  sync.Mutex
	w   io.WriteCloser
	buf strings.Builder
}

func (t *tee) Write(p []byte) (int, error) {
	t.mu.Lock()
	t.buf.Write(p)
	t.mu.Unlock()
	return t.w.Write(p)
}

func (t *tee) Close() error { return t.w.Close() }

func (t *tee) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf.String()
}

// gate lets a test hold the engine's stdout, so the adapter's view lags
// the engine's (a response that does not arrive in time). Bytes read
// from the engine after hold are delivered only after open.
type gate struct {
	chunks chan []byte
	err    error
	rest   []byte
	mu     sync.Mutex
	cond   *sync.Cond
	held   bool
}

func newGate(r io.Reader) *gate {
	g := &gate{chunks: make(chan []byte, 16)}
	g.cond = sync.NewCond(&g.mu)
	go func() {
		defer close(g.chunks)
		for {
			b := make([]byte, 32<<10)
			n, err := r.Read(b)
			if n > 0 {
				g.chunks <- b[:n]
			}
			if err != nil {
				g.mu.Lock()
				g.err = err
				g.mu.Unlock()
				return
			}
		}
	}()
	return g
}

func (g *gate) Read(p []byte) (int, error) {
	if len(g.rest) == 0 {
		b, ok := <-g.chunks
		if !ok {
			g.mu.Lock()
			defer g.mu.Unlock()
			return 0, g.err
		}
		g.rest = b
	}
	g.mu.Lock()
	for g.held {
		g.cond.Wait()
	}
	g.mu.Unlock()
	n := copy(p, g.rest)
	g.rest = g.rest[n:]
	return n, nil
}

func (g *gate) hold() { g.mu.Lock(); g.held = true; g.mu.Unlock() }

func (g *gate) open() { g.mu.Lock(); g.held = false; g.cond.Broadcast(); g.mu.Unlock() }

// closeFiles closes what engine.Spec.Handed opened, once the engine ran.
func closeFiles(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}
