package fakepi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/contrib/fakepi"
	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
)

// fakeBin is the fake Pi built once by TestMain.
var fakeBin string

func TestMain(m *testing.M) {
	// `make test` builds the fake beforehand: the sandbox the tests run in
	// has no module cache and no VCS access for `go build`.
	if d := os.Getenv("MOSAIC_BIN_DIR"); d != "" {
		if p := filepath.Join(d, "fakepi"); fileExists(p) {
			fakeBin = p
			os.Exit(m.Run())
		}
	}
	dir, err := os.MkdirTemp("", "fakepi-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fakeBin = filepath.Join(dir, "fakepi")
	build := exec.Command("go", "build", "-o", fakeBin, "github.com/mosaic-agents/mosaic/contrib/fakepi/cmd/fakepi")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build fakepi:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// engine is one implementation under test: the fake, or the real pinned Pi.
type engine struct {
	name string
	bin  string
	real bool
}

// engines lists the fake and, when MOSAIC_PI names the pinned pi, the
// real binary. In CI the real binary is required.
func engines(t *testing.T) []engine {
	t.Helper()
	es := []engine{{name: "fake", bin: fakeBin}}
	if p := os.Getenv("MOSAIC_PI"); p != "" {
		es = append(es, engine{name: "real", bin: p, real: true})
	} else if os.Getenv("CI") == "true" {
		t.Fatal("CI=true but MOSAIC_PI is unset: the conformance tests must run against the real pinned Pi (contrib/pi/install.sh)")
	}
	return es
}

// forEach runs fn as a subtest per engine, reporting a skipped real run.
func forEach(t *testing.T, fn func(t *testing.T, e engine)) {
	t.Helper()
	for _, e := range engines(t) {
		t.Run(e.name, func(t *testing.T) { fn(t, e) })
	}
	if os.Getenv("MOSAIC_PI") == "" {
		t.Log("real Pi not tested: MOSAIC_PI is unset (MOSAIC_PI=$(contrib/pi/install.sh))")
	}
}

// rec is one stdout record.
type rec map[string]any

func (r rec) str(k string) string { s, _ := r[k].(string); return s }
func (r rec) obj(k string) rec {
	m, _ := r[k].(map[string]any)
	return rec(m)
}

// kind names a record by type and the sub-fields that order matters for.
func (r rec) kind() string {
	t := r.str("type")
	switch t {
	case "message_update":
		return t + ":" + r.obj("assistantMessageEvent").str("type")
	case "message_start", "message_end":
		m := r.obj("message")
		k := t + ":" + m.str("role")
		if m.str("role") == "assistant" && t == "message_end" {
			k += ":" + m.str("stopReason")
		}
		return k
	case "response":
		return fmt.Sprintf("response:%s:%v", r.str("command"), r["success"])
	}
	return t
}

func kinds(rs []rec) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.kind()
	}
	return out
}

type options struct {
	model  bool
	script stubmodel.Script
	// session reuses a session file (a restart); "" makes a new path.
	session string
	home    string
	// env is added to the fake's environment.
	env []string
}

// proc is a running engine spoken to with raw JSON lines.
type proc struct {
	t       *testing.T
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	recs    chan rec
	exited  chan struct{}
	exitErr error
	home    string
	session string
	stub    *stubmodel.Server
}

func start(t *testing.T, e engine, o options) *proc {
	t.Helper()
	home := o.home
	if home == "" {
		home = t.TempDir()
	}
	work := filepath.Join(home, "work")
	agent := filepath.Join(home, "agent")
	for _, d := range []string{work, agent, filepath.Join(home, "sessions")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	session := o.session
	if session == "" {
		session = filepath.Join(home, "sessions", "s.jsonl")
	}
	p := &proc{t: t, home: home, session: session, recs: make(chan rec, 4096), exited: make(chan struct{})}
	args := []string{"--mode", "rpc", "--no-extensions", "--no-prompt-templates", "--no-themes", "--no-skills", "--no-context-files", "--session", session}
	env := []string{"HOME=" + home, "PATH=/usr/local/bin:/usr/bin:/bin", "PI_OFFLINE=1", "PI_SKIP_VERSION_CHECK=1", "PI_CODING_AGENT_DIR=" + agent}
	if o.model {
		srv, err := stubmodel.Start(o.script)
		if err != nil {
			t.Fatal(err)
		}
		p.stub = srv
		t.Cleanup(func() { _ = srv.Close() })
		m, err := stubmodel.WriteAgentDir(agent, srv.BaseURL())
		if err != nil {
			t.Fatal(err)
		}
		args = append(args, "--provider", m.Provider, "--model", m.Model)
		if !e.real {
			sp := filepath.Join(home, "script.json")
			if err := stubmodel.WriteScript(sp, o.script); err != nil {
				t.Fatal(err)
			}
			env = append(env, fakepi.EnvScript+"="+sp)
		}
	}
	if !e.real {
		env = append(env, o.env...)
	}
	cmd := exec.Command(e.bin, args...)
	cmd.Dir = work
	cmd.Env = env
	var stderr strings.Builder
	cmd.Stderr = &lockedWriter{w: &stderr}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", e.bin, err)
	}
	p.cmd, p.stdin = cmd, stdin
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
		for sc.Scan() {
			var r rec
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				r = rec{"type": "unparsable", "line": sc.Text()}
			}
			p.recs <- r
		}
		p.exitErr = cmd.Wait()
		close(p.recs)
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = stdin.Close()
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("%s stderr:\n%s", e.name, stderr.String())
		}
	})
	return p
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func (p *proc) send(v any) {
	p.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		p.t.Fatal(err)
	}
	if _, err := p.stdin.Write(append(b, '\n')); err != nil {
		p.t.Fatalf("write stdin: %v", err)
	}
}

// timeout bounds every wait so a broken engine fails the test.
const timeout = 60 * time.Second

// until reads records until pred matches one (included) and returns them.
func (p *proc) until(what string, pred func(rec) bool) []rec {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var got []rec
	for {
		select {
		case r, ok := <-p.recs:
			if !ok {
				p.t.Fatalf("engine exited (%v) while waiting for %s; got %v", p.exitErr, what, kinds(got))
			}
			got = append(got, r)
			if pred(r) {
				return got
			}
		case <-ctx.Done():
			p.t.Fatalf("timed out waiting for %s; got %v", what, kinds(got))
		}
	}
}

func isResponse(id string) func(rec) bool {
	return func(r rec) bool { return r.str("type") == "response" && r.str("id") == id }
}

func isKind(k string) func(rec) bool { return func(r rec) bool { return r.kind() == k } }

// call sends a command with id and returns the records up to its response.
func (p *proc) call(cmd map[string]any) []rec {
	p.t.Helper()
	id, _ := cmd["id"].(string)
	p.send(cmd)
	return p.until("response "+id, isResponse(id))
}

// wait waits for the engine to exit and returns its error.
func (p *proc) wait() error {
	p.t.Helper()
	for range p.recs {
	}
	select {
	case <-p.exited:
		return p.exitErr
	case <-time.After(timeout):
		p.t.Fatal("engine did not exit")
		return errors.New("timeout")
	}
}

func last(rs []rec) rec { return rs[len(rs)-1] }

func equalKinds(t *testing.T, what string, got []rec, want []string) {
	t.Helper()
	g := kinds(got)
	if strings.Join(g, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\n got  %v\n want %v", what, g, want)
	}
}
