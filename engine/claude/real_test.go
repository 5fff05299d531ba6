package claude

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mosaic-agents/mosaic/contrib/fakeanthropic"
	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/engine"
	hclaude "github.com/mosaic-agents/mosaic/history/claude"
	"github.com/mosaic-agents/mosaic/proofs"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/scopes"
)

// realClaude is the pinned binary (MOSAIC_CLAUDE=$(contrib/claude/install.sh));
// required under CI.
func realClaude(t *testing.T) string {
	t.Helper()
	p := os.Getenv("MOSAIC_CLAUDE")
	if p == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true but MOSAIC_CLAUDE is unset: run make claude (contrib/claude/install.sh)")
		}
		t.Skip("MOSAIC_CLAUDE is unset (MOSAIC_CLAUDE=$(contrib/claude/install.sh))")
	}
	return p
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// live is one Claude CLI launched in a transient scope with a Conn on it
// and every event collected.
type live struct {
	*Conn
	h    *scopes.Handle
	mu   sync.Mutex
	evs  []protocol.Event
	wake chan struct{}
}

func (l *live) collect() {
	for e := range l.Events() {
		l.mu.Lock()
		l.evs = append(l.evs, e)
		close(l.wake)
		l.wake = make(chan struct{})
		l.mu.Unlock()
	}
}

// waitEvent waits for an event after index from matching ok and returns
// its index.
func (l *live) waitEvent(t *testing.T, from int, what string, ok func(protocol.Event) bool) int {
	t.Helper()
	deadline := time.After(90 * time.Second)
	for {
		l.mu.Lock()
		for i := from; i < len(l.evs); i++ {
			if ok(l.evs[i]) {
				l.mu.Unlock()
				return i
			}
		}
		wake := l.wake
		l.mu.Unlock()
		select {
		case <-wake:
		case <-l.Done():
			// drain what is left, then give up
			time.Sleep(100 * time.Millisecond)
			l.mu.Lock()
			n := len(l.evs)
			l.mu.Unlock()
			if n == from {
				t.Fatalf("engine output ended waiting for %s (err %v)", what, l.Err())
			}
			from = n
		case <-deadline:
			t.Fatalf("no %s", what)
		}
	}
}

func (l *live) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.evs)
}

func (l *live) since(from int) []protocol.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]protocol.Event(nil), l.evs[from:]...)
}

func settledAfter(t *testing.T, l *live, from int) int {
	return l.waitEvent(t, from, "run-settled", func(e protocol.Event) bool { return e.Kind == protocol.EventRunSettled })
}

// waitDecision waits for a pending decision not in seen.
func (l *live) waitDecision(t *testing.T, seen int) engine.NativeDecision {
	t.Helper()
	deadline := time.After(90 * time.Second)
	for {
		ch := l.Changed()
		if ds := l.Decisions(); len(ds) > seen && ds[seen].State == engine.DecisionPending {
			return ds[seen]
		}
		select {
		case <-ch:
		case <-l.Done():
			t.Fatal("engine output ended waiting for a permission request")
		case <-deadline:
			t.Fatalf("no permission request: %+v", l.Decisions())
		}
	}
}

type claudeRig struct {
	m    *scopes.Manager
	fake *fakeanthropic.Server
	// decoy is what the controller's own environment points at: it must
	// see nothing.
	decoy *fakeanthropic.Server
	cfg   Config
	n     int
	// tap, when set, gets a copy of each launched CLI's stdout.
	tap io.Writer
}

func newClaudeRig(t *testing.T) *claudeRig {
	t.Helper()
	bin := realClaude(t)
	sandboxtest.Require(t)
	fake, err := fakeanthropic.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fake.Close() })
	decoy, err := fakeanthropic.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { decoy.Close() })
	pin, err := Resolve(ctxT(t, time.Minute), bin, os.Environ())
	if err != nil {
		t.Fatal(err)
	}
	if pin.SHA256 != PinnedSHA256 || pin.Version != PinnedVersion {
		t.Fatalf("pin %+v, want the digest's binary", pin)
	}
	root := t.TempDir()
	dirs := Dirs{Config: filepath.Join(root, "config"), Tmp: filepath.Join(root, "tmp"), Runtime: filepath.Join(root, "run")}
	for _, d := range []string{dirs.Config, dirs.Tmp, dirs.Runtime, filepath.Join(root, "work")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	envFile := filepath.Join(root, "claude.env")
	if err := os.WriteFile(envFile, []byte("ANTHROPIC_API_KEY=dummy-test-key\nANTHROPIC_BASE_URL="+fake.URL+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := scopes.NewManager(scopes.Config{})
	t.Cleanup(m.Close)
	// The controller's environment carries credentials, a base URL and
	// settings of its own: none of them may reach the engine.
	ctl := append(os.Environ(), "ANTHROPIC_API_KEY=controller-leak", "ANTHROPIC_BASE_URL="+decoy.URL,
		"CLAUDE_CONFIG_DIR="+filepath.Join(root, "controller-claude"), "DISABLE_TELEMETRY=0", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=0")
	return &claudeRig{m: m, fake: fake, decoy: decoy, cfg: Config{
		Pin: pin, Session: NewSession(), ProjectRoot: filepath.Join(root, "work"),
		Dirs: dirs, EnvFile: envFile, Environ: ctl,
	}}
}

func (r *claudeRig) launch(t *testing.T, resume bool) *live {
	t.Helper()
	spec, err := Command(r.cfg, resume)
	if err != nil {
		t.Fatal(err)
	}
	r.n++
	exec := "claude-exec-" + string(rune('0'+r.n))
	h, err := r.m.Launch(ctxT(t, time.Minute), scopes.Spec{
		Conversation: "claude-" + strings.ReplaceAll(t.Name(), "/", "_"), Execution: exec,
		Argv: spec.Args, Env: spec.Env, Dir: spec.Dir,
	})
	if err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, h.Stderr)
	var out io.Reader = h.Stdout
	if r.tap != nil {
		out = io.TeeReader(h.Stdout, r.tap)
	}
	c, err := New(out, h.Stdin, r.cfg.Session, engine.Options{Execution: exec, CommandTimeout: 60 * time.Second, AbortTimeout: 60 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	l := &live{Conn: c, h: h, wake: make(chan struct{})}
	go l.collect()
	t.Cleanup(func() {
		select {
		case <-h.Done():
		default:
			h.Stop(context.Background(), scopes.StopOptions{Stop: "cleanup"})
		}
		h.Close()
	})
	return l
}

func prompt(t *testing.T, l *live, text string) int {
	t.Helper()
	from := l.count()
	d, err := l.Prompt(ctxT(t, 2*time.Minute), text)
	if err != nil {
		t.Fatalf("prompt %q: %v (%+v)", text, err, d)
	}
	if d.Receipt != protocol.ReceiptAcknowledged {
		t.Fatalf("prompt %q receipt %s", text, d.Receipt)
	}
	return from
}

func textOf(evs []protocol.Event) string {
	var b strings.Builder
	for _, e := range evs {
		if e.Kind == protocol.EventTextDelta {
			b.WriteString(e.Text)
		}
	}
	return b.String()
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// TestRealClaudeSession drives the real Claude Code 2.1.328 in a transient
// scope against the loopback fake: a streamed prompt, a Bash call allowed
// once and one denied, an interrupt mid-stream and one with a permission
// request pending, a tool that leaves a setsid child behind, a force stop
// through the scope (the child dies, the stop proven), then --resume on
// the same session and a second prompt whose transcript continues the
// pinned leaf. The fake's log shows it was the only thing contacted.
func TestRealClaudeSession(t *testing.T) {
	r := newClaudeRig(t)
	tmpBefore := claudeTmp(t)
	home, _ := os.UserHomeDir()
	_, homeErr := os.Lstat(filepath.Join(home, ".claude"))
	l := r.launch(t, false)
	if _, err := l.Initialize(ctxT(t, time.Minute)); err != nil {
		t.Fatal(err)
	}
	work := r.cfg.ProjectRoot

	t.Run("streamed prompt", func(t *testing.T) {
		from := prompt(t, l, "hello there")
		end := settledAfter(t, l, from)
		evs := l.since(from)[:end-from+1]
		if got := textOf(evs); got != "Hello from fake. You said: hello there" {
			t.Fatalf("streamed text %q", got)
		}
		deltas := 0
		for _, e := range evs {
			if e.Kind == protocol.EventTextDelta && e.Text != "" {
				deltas++
			}
		}
		if deltas < 2 {
			t.Fatalf("%d deltas: the text did not stream", deltas)
		}
		if l.Turn().Running || l.Turn().Slot != nil {
			t.Fatalf("turn after result %+v", l.Turn())
		}
	})

	t.Run("the running engine's environment is sealed", func(t *testing.T) {
		members, err := l.h.Members()
		if err != nil {
			t.Fatal(err)
		}
		checked := 0
		for _, m := range members {
			b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(m.PID), "environ"))
			if err != nil || !strings.Contains(string(b), "CLAUDE_CONFIG_DIR=") {
				continue
			}
			env := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
			for _, f := range Forced {
				if !slices.Contains(env, f) {
					t.Errorf("pid %d (%s) runs without %s", m.PID, m.Comm, f)
				}
			}
			for _, kv := range env {
				if strings.Contains(kv, "controller-leak") || strings.Contains(kv, r.decoy.URL) || strings.Contains(kv, "controller-claude") || kv == "DISABLE_TELEMETRY=0" {
					t.Errorf("pid %d (%s) has the controller's %s", m.PID, m.Comm, kv)
				}
			}
			checked++
		}
		if checked == 0 {
			t.Fatalf("no engine process found in %+v", members)
		}
	})

	decisions := 0
	t.Run("bash allowed once", func(t *testing.T) {
		from := prompt(t, l, "please BASH{touch allowed.txt}")
		d := l.waitDecision(t, decisions)
		decisions++
		if d.ToolName != "Bash" || !strings.Contains(string(d.Input), "touch allowed.txt") || len(d.Choices) != 2 {
			t.Fatalf("decision %+v", d)
		}
		if exists(filepath.Join(work, "allowed.txt")) {
			t.Fatal("the tool ran before the answer")
		}
		if err := l.Decide(ctxT(t, time.Minute), d.ID, engine.ChoiceAllowOnce); err != nil {
			t.Fatal(err)
		}
		end := settledAfter(t, l, from)
		if !exists(filepath.Join(work, "allowed.txt")) {
			t.Fatal("allowed tool did not run")
		}
		var toolEnd *protocol.Event
		for _, e := range l.since(from)[:end-from+1] {
			if e.Kind == protocol.EventToolEnd {
				toolEnd = &e
			}
		}
		if toolEnd == nil || toolEnd.Tool.IsError || toolEnd.Tool.CallID != d.ToolUseID {
			t.Fatalf("tool-end %+v", toolEnd)
		}
		if err := l.Decide(ctxT(t, time.Minute), d.ID, engine.ChoiceDeny); err == nil {
			t.Fatal("a second, conflicting answer was accepted")
		}
	})

	t.Run("bash denied", func(t *testing.T) {
		from := prompt(t, l, "now BASH{touch denied.txt}")
		d := l.waitDecision(t, decisions)
		decisions++
		if err := l.Decide(ctxT(t, time.Minute), d.ID, engine.ChoiceDeny); err != nil {
			t.Fatal(err)
		}
		end := settledAfter(t, l, from)
		if exists(filepath.Join(work, "denied.txt")) {
			t.Fatal("the denied tool ran")
		}
		found := false
		for _, e := range l.since(from)[:end-from+1] {
			if e.Kind == protocol.EventToolEnd && e.Tool.CallID == d.ToolUseID {
				found = e.Tool.IsError
			}
		}
		if !found {
			t.Fatal("no error tool-end for the denied call")
		}
	})

	t.Run("interrupt mid-stream", func(t *testing.T) {
		from := prompt(t, l, "HANG until interrupted")
		l.waitEvent(t, from, "a streamed delta", func(e protocol.Event) bool { return e.Kind == protocol.EventTextDelta && e.Text != "" })
		p, err := l.Interrupt(ctxT(t, 2*time.Minute), "stop-mid-stream")
		if err != nil {
			t.Fatal(err)
		}
		if p.Uncertain || !p.AbortAcknowledged || p.TerminalReason != "aborted_streaming" || p.NativeQueue != engine.QueueCleared || p.InterruptedRun == 0 {
			t.Fatalf("proof %+v", p)
		}
		if tr := l.Turn(); tr.Fenced || tr.Running || tr.Slot != nil {
			t.Fatalf("turn after a certain interrupt %+v", tr)
		}
	})

	t.Run("interrupt with approval pending", func(t *testing.T) {
		prompt(t, l, "BASH{touch pending.txt}")
		d := l.waitDecision(t, decisions)
		decisions++
		// A client that reconnects re-reads the pending request through
		// initialize, in the shape the digest recorded: the same
		// decision, not a second one.
		pending, err := l.Initialize(ctxT(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if len(pending) != 1 || pending[0].ID != d.ID || len(l.Decisions()) != decisions {
			t.Fatalf("initialize re-read %+v, decisions %+v", pending, l.Decisions())
		}
		p, err := l.Interrupt(ctxT(t, 2*time.Minute), "stop-pending")
		if err != nil {
			t.Fatal(err)
		}
		if p.Uncertain || p.TerminalReason != "aborted_tools" {
			t.Fatalf("proof %+v", p)
		}
		got := l.Decisions()[decisions-1]
		if got.ID != d.ID || got.State != engine.DecisionCancelled {
			t.Fatalf("decision after interrupt %+v, want cancelled", got)
		}
		if exists(filepath.Join(work, "pending.txt")) {
			t.Fatal("the pending tool ran")
		}
		if err := l.Decide(ctxT(t, time.Minute), d.ID, engine.ChoiceAllowOnce); err == nil {
			t.Fatal("a cancelled request was answered")
		}
	})

	t.Run("setsid child then force stop", func(t *testing.T) {
		// The child lets go of the tool's output (the CLI ends a tool whose
		// pipes stay open, and what holds them) and the command ends only
		// once the child is in a session of its own (setsid has run when
		// sid.ok exists), so the turn's end never races the setsid. The
		// wait spins (no sleep of its own to be taken for the child).
		from := prompt(t, l, "BASH{setsid sh -c 'touch sid.ok; exec sleep 300' >/dev/null 2>&1 & until [ -e sid.ok ]; do :; done; echo started}")
		d := l.waitDecision(t, decisions)
		decisions++
		if err := l.Decide(ctxT(t, time.Minute), d.ID, engine.ChoiceAllowOnce); err != nil {
			t.Fatal(err)
		}
		settledAfter(t, l, from)
		child := -1
		var members []scopes.Member
		for deadline := time.Now().Add(30 * time.Second); child < 0 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			var err error
			if members, err = l.h.Members(); err != nil {
				t.Fatal(err)
			}
			for _, m := range members {
				if m.Comm == "sleep" { // sh has exec'd it
					child = m.PID
				}
			}
		}
		if child < 0 {
			t.Fatalf("no setsid sleep in the scope: %+v", members)
		}
		fd, err := unix.PidfdOpen(child, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		res := l.h.Stop(ctxT(t, 2*time.Minute), scopes.StopOptions{Stop: "stop-claude-k1", Grace: 2 * time.Second})
		if res.Outcome != scopes.Stopped {
			t.Fatalf("stop %s: %s %v", res.Outcome, res.Reason, res.Notes)
		}
		if err := unix.PidfdSendSignal(fd, 0, nil, 0); !errors.Is(err, unix.ESRCH) {
			t.Fatalf("the setsid child survived the stop (signal 0: %v)", err)
		}
		p, err := proofs.NewCohortProof(res.Observation)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := proofs.Encode(p)
		if _, rep, err := proofs.VerifyBytes(body); err != nil || !rep.OK() {
			t.Fatalf("proof does not verify: %v %v", err, rep.Err())
		}
	})

	t.Run("resume and a second prompt", func(t *testing.T) {
		before, err := hclaude.Read(hclaude.Ref{ConfigDir: r.cfg.Dirs.Config, Project: work, Session: r.cfg.Session})
		if err != nil {
			t.Fatal(err)
		}
		leaf := before.DefaultLeaf()
		l2 := r.launch(t, true)
		from := prompt(t, l2, "second prompt")
		end := settledAfter(t, l2, from)
		if got := textOf(l2.since(from)[:end-from+1]); !strings.Contains(got, "second prompt") {
			t.Fatalf("second prompt answered %q", got)
		}
		after, err := NewEngine(r.cfg).History(ctxT(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		msgs, err := after.Messages("")
		if err != nil {
			t.Fatal(err)
		}
		if msgs[0].Blocks[0].Text != "hello there" {
			t.Fatalf("resumed branch starts %+v", msgs[0])
		}
		var resumed *engine.HistoryMessage
		for i := range msgs {
			if msgs[i].Role == "user" && len(msgs[i].Blocks) > 0 && msgs[i].Blocks[0].Text == "second prompt" {
				resumed = &msgs[i]
			}
		}
		if resumed == nil {
			t.Fatal("the second prompt is not on the default branch")
		}
		// The resumed prompt hangs off the pinned leaf, possibly through
		// the CLI's own bookkeeping links (K8's check).
		if !chainHas(t, r.cfg, resumed.ID, leaf) {
			t.Fatalf("the resumed prompt does not continue the pinned leaf %s", leaf)
		}
		l2.Close()
	})

	t.Run("nothing written outside the owned directories", func(t *testing.T) {
		if after := claudeTmp(t); !slices.Equal(after, tmpBefore) {
			t.Errorf("the CLI wrote to /tmp: %v, before %v", after, tmpBefore)
		}
		if _, err := os.Lstat(filepath.Join(home, ".claude")); (err == nil) != (homeErr == nil) {
			t.Errorf("~/.claude appeared or vanished (before: %v, after: %v)", homeErr, err)
		}
		if _, err := os.Stat(filepath.Join(r.cfg.Dirs.Config, "projects", hclaude.Slug(work), r.cfg.Session+".jsonl")); err != nil {
			t.Errorf("the transcript is not in the owned config dir: %v", err)
		}
	})

	t.Run("only the fake was contacted", func(t *testing.T) {
		reqs := r.fake.Requests()
		if len(reqs) == 0 {
			t.Fatal("the fake saw nothing")
		}
		if d := r.decoy.Requests(); len(d) != 0 {
			t.Fatalf("the controller's base URL was contacted: %+v", d)
		}
		if u := r.fake.Unexpected(); len(u) != 0 {
			t.Fatalf("unexpected requests: %+v", u)
		}
		for _, q := range reqs {
			if q.Method != "POST" || q.Path != "/v1/messages?beta=true" || q.APIKey != "dummy-test-key" || q.Session != r.cfg.Session {
				t.Fatalf("request %+v", q)
			}
		}
	})
}

// claudeTmp lists what the CLI leaves in /tmp when TMPDIR and
// XDG_RUNTIME_DIR are not sealed (claude-<uid>/, cc-socks/).
func claudeTmp(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir(os.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "claude") || strings.HasPrefix(e.Name(), "cc-socks") {
			out = append(out, e.Name())
		}
	}
	return out
}

// chainHas reports whether leaf is an ancestor of id in the transcript.
func chainHas(t *testing.T, cfg Config, id, leaf string) bool {
	t.Helper()
	tr, err := hclaude.Read(hclaude.Ref{ConfigDir: cfg.Dirs.Config, Project: cfg.ProjectRoot, Session: cfg.Session})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Ancestor(leaf, id)
}

// BenchmarkCheck measures the pin check before every spawn: a full
// SHA-256 of the pinned binary.
func BenchmarkCheck(b *testing.B) {
	bin := os.Getenv("MOSAIC_CLAUDE")
	if bin == "" {
		b.Skip("MOSAIC_CLAUDE is unset")
	}
	pin := Pin{Path: bin, Version: PinnedVersion, SHA256: PinnedSHA256}
	st, err := os.Stat(bin)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(st.Size())
	for b.Loop() {
		if err := Check(pin); err != nil {
			b.Fatal(err)
		}
	}
}
