package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/engine/pi"
	"github.com/mosaic-agents/mosaic/history"
	"github.com/mosaic-agents/mosaic/protocol"
)

// probeExtension is a reviewed extension file of the kind a conversation
// may pin (-e): each marker in the prompt makes it do, once the run
// settled, one thing the extension API lets it do to the session. The
// session watch must vouch for every entry Pi appends for it.
const probeExtension = `
export default function (pi: any) {
  let prompt = "";
  const state = { saves: 0, items: [] as string[] };
  pi.on("before_agent_start", async (event: any) => {
    prompt = String(event.prompt ?? "");
    if (prompt.includes("EXT_INJECT")) {
      return { message: { customType: "probe-inject", content: "injected \u00e9", display: true, details: { from: "before_agent_start" } } };
    }
  });
  // A tool in the style of the examples' todo list: each result's
  // details list the live items, which the next call changes.
  const todos = [{ id: 1, done: false }];
  pi.registerTool({
    name: "probe_todo",
    label: "Todo",
    description: "toggle the todo",
    parameters: { type: "object", properties: {} },
    async execute() {
      todos[0].done = !todos[0].done;
      return { content: [{ type: "text", text: "toggled" }], details: { todos: [...todos] } };
    },
  });
  pi.on("agent_settled", async (_event: any, ctx: any) => {
    const p = prompt;
    prompt = "";
    if (p.includes("EXT_ENTRY")) pi.appendEntry("probe-entry", { n: 1, text: "\u00e9 \u2603", list: [1, 2.5, null], nested: { ok: true } });
    if (p.includes("EXT_MESSAGE")) pi.sendMessage({ customType: "probe-note", content: "a note", display: true, details: { k: 1 } });
    if (p.includes("EXT_NAME")) pi.setSessionName("  probe\nsession  ");
    if (p.includes("EXT_LABEL")) pi.setLabel(ctx.sessionManager.getLeafId(), "bookmark");
    if (p.includes("EXT_THINKING")) pi.setThinkingLevel("high");
    if (p.includes("EXT_MODEL")) await pi.setModel(ctx.modelRegistry.find("fakellm", "fake-thinker"));
    if (p.includes("EXT_COMPACT")) ctx.compact();
    if (p.includes("EXT_LIVE_NOTE")) {
      // A note whose details the extension keeps and changes after
      // sending it, as a status line counts on.
      const live = { count: 1 };
      pi.sendMessage({ customType: "probe-live", content: "live", display: true, details: live });
      live.count++;
      pi.sendMessage({ customType: "probe-live", content: "live", display: true, details: { count: 0 } });
    }
    if (p.includes("EXT_SAVE")) {
      // One state object saved twice, changed in between, as the
      // examples' games save theirs: Pi holds the object, not a copy.
      for (let i = 0; i < 2; i++) {
        state.saves++;
        state.items.push("save " + state.saves);
        pi.appendEntry("probe-state", state);
      }
    }
  });
}
`

// realPi is the pinned Pi on a session file, its appends checked as the
// controller's session watch checks them (unvouched, heldAfter) by a poll
// much faster than the watch's, so every state the file passes through
// is seen.
type realPi struct {
	t       *testing.T
	conn    *pi.Conn
	session string
	done    chan struct{}

	mu      sync.Mutex
	foreign []string       // what the check called foreign
	types   map[string]int // entry types compared, by type
	checked int64          // the file size the check vouched for
	last    *history.Snapshot
	stop    chan struct{}
	stopped chan struct{}
}

// piLaunch is how one engine is started: the seal's optional values and
// the extensions pinned.
type piLaunch struct {
	model, thinking string
	ext             bool
}

type piRig struct {
	t        *testing.T
	dir      string
	session  string
	agentDir string
	pin      pi.Pin
	extPath  string
	started  []*realPi // every engine started, a resume's too
}

func newPiRig(t *testing.T, script stubmodel.Script, window int) *piRig {
	t.Helper()
	bin := os.Getenv("MOSAIC_PI")
	if bin == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true needs MOSAIC_PI pointing at the pinned pi (contrib/pi/install.sh)")
		}
		t.Skip("real Pi not run: MOSAIC_PI is unset (set it to the pinned pi from contrib/pi/install.sh)")
	}
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state"))
	pin, err := pi.Resolve(bin, pi.ResolveOptions{PATH: os.Getenv("PATH")})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := stubmodel.Start(script)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	r := &piRig{t: t, dir: dir, session: filepath.Join(dir, "sessions", "s.jsonl"), agentDir: filepath.Join(dir, "agent"), pin: pin}
	for _, d := range []string{filepath.Dir(r.session), filepath.Join(dir, "home"), filepath.Join(dir, "proj")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := stubmodel.WriteAgentDir(r.agentDir, srv.BaseURL()); err != nil {
		t.Fatal(err)
	}
	r.addModels(window)
	r.extPath = filepath.Join(dir, "probe.ts")
	if err := os.WriteFile(r.extPath, []byte(probeExtension), 0o644); err != nil {
		t.Fatal(err)
	}
	return r
}

// addModels adds a reasoning model beside the stub's (so a thinking
// level or a model change is not a no-op) and sets the context window of
// both when window is not zero (so a short conversation reaches Pi's
// compaction threshold).
func (r *piRig) addModels(window int) {
	r.t.Helper()
	p := filepath.Join(r.agentDir, "models.json")
	b, err := os.ReadFile(p)
	if err != nil {
		r.t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		r.t.Fatal(err)
	}
	prov := cfg["providers"].(map[string]any)[stubmodel.DefaultProvider].(map[string]any)
	models := prov["models"].([]any)
	base := models[0].(map[string]any)
	thinker := map[string]any{}
	for k, v := range base {
		thinker[k] = v
	}
	thinker["id"], thinker["name"], thinker["reasoning"] = "fake-thinker", "Fake Thinker", true
	models = append(models, thinker)
	if window != 0 {
		for _, m := range models {
			m.(map[string]any)["contextWindow"] = window
		}
	}
	prov["models"] = models
	if b, err = json.Marshal(cfg); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		r.t.Fatal(err)
	}
}

// start launches Pi on the rig's session; the file as it is now is
// vouched for, as the controller's load check does.
func (r *piRig) start(l piLaunch) *realPi {
	t := r.t
	t.Helper()
	seal := pi.Seal{Session: r.session, Provider: stubmodel.DefaultProvider, Model: stubmodel.DefaultModel, Thinking: l.thinking}
	if l.model != "" {
		seal.Model = l.model
	}
	cfg := pi.Config{Pin: r.pin, Seal: seal, AgentDir: r.agentDir, ProjectRoot: filepath.Join(r.dir, "proj")}
	if l.ext {
		e, err := pi.PinExtension(r.extPath)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Extensions = []pi.Extension{e}
	}
	environ := append(slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "HOME=") }), "HOME="+filepath.Join(r.dir, "home"))
	spec, err := pi.Command(cfg, environ)
	if err != nil {
		t.Fatal(err)
	}
	prev, err := history.Read(r.session, history.Options{})
	if err != nil {
		t.Fatal(err)
	}
	stdinR, stdinW := io.Pipe()
	stdoutR, stdoutW := io.Pipe()
	cmd := &exec.Cmd{Path: spec.Path, Args: spec.Args, Env: spec.Env, Dir: spec.Dir, Stdin: stdinR, Stdout: stdoutW}
	var stderr strings.Builder
	cmd.Stderr = &lockedWriter{w: &stderr}
	if cmd.ExtraFiles, err = spec.Handed(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, f := range cmd.ExtraFiles {
			f.Close()
		}
	})
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &realPi{t: t, session: r.session, done: make(chan struct{}), types: map[string]int{}, checked: prev.Size(), last: prev,
		stop: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(p.done)
		cmd.Wait()
		stdoutW.Close()
	}()
	p.conn, err = pi.New(stdoutR, stdinW, engine.Options{Execution: "x-" + t.Name(), CommandTimeout: 10 * time.Second, AbortTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for range p.conn.Events() {
		}
	}()
	if _, err := p.conn.GetStateWithin(context.Background(), 30*time.Second); err != nil {
		t.Fatalf("pi did not answer get_state: %v\n%s", err, stderr.String())
	}
	go p.watch(prev)
	r.started = append(r.started, p)
	t.Cleanup(func() {
		p.close()
		if t.Failed() {
			t.Logf("pi stderr:\n%s", stderr.String())
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

// watch is the session watch's check (watchSession) every 5 ms.
func (p *realPi) watch(prev *history.Snapshot) {
	defer close(p.stopped)
	for {
		select {
		case <-p.stop:
			return
		case <-time.After(5 * time.Millisecond):
		}
		snap, err := history.Follow(p.session, prev, history.Options{})
		if beingCreated(err, prev) {
			continue
		}
		if code := protocol.CodeOf(err); code != "" {
			p.record("the session file can no longer be vouched for: %v", err)
			return
		}
		if err != nil {
			continue
		}
		if len(snap.Appended()) > 0 {
			ours, err := heldAfter(context.Background(), p.conn, prev, snap.Size())
			if err != nil {
				continue
			}
			if id, what := unvouched(snap, ours); id != "" {
				p.record("%s\nfile:   %s\nengine: %s", what, lineOf(snap, id), ours[id])
				return
			}
			p.mu.Lock()
			for _, l := range snap.AppendedLines() {
				var e struct{ Type string }
				if json.Unmarshal(l, &e) == nil && e.Type != "session" {
					p.types[e.Type]++
				}
			}
			p.mu.Unlock()
		}
		prev = snap
		p.mu.Lock()
		p.checked, p.last = snap.Size(), snap
		p.mu.Unlock()
	}
}

func lineOf(snap *history.Snapshot, id string) string {
	for _, l := range snap.AppendedLines() {
		var e struct{ ID string }
		if json.Unmarshal(l, &e) == nil && e.ID == id {
			return string(l)
		}
	}
	return ""
}

func (p *realPi) record(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.foreign = append(p.foreign, fmt.Sprintf(format, args...))
}

// settle waits for the engine to settle past settles runs and for the
// file to stay still, checked whole, for half a second.
func (p *realPi) settle(settles int) {
	p.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for p.conn.Turn().Settles < settles {
		if time.Now().After(deadline) {
			p.t.Fatalf("the engine did not settle (%d of %d runs)", p.conn.Turn().Settles, settles)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var last int64 = -1
	still := time.Now()
	for {
		fi, err := os.Stat(p.session)
		var size int64
		if err == nil {
			size = fi.Size()
		}
		p.mu.Lock()
		checked, failed := p.checked, len(p.foreign) > 0
		p.mu.Unlock()
		if failed {
			return
		}
		if size != last {
			last, still = size, time.Now()
		}
		if checked == size && time.Since(still) > 500*time.Millisecond {
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("the check did not catch up with the file (%d of %d bytes)", checked, size)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// prompt sends text and waits for its run and what follows it to settle.
func (p *realPi) prompt(text string) {
	p.t.Helper()
	defer p.late(p.base())
	n := p.conn.Turn().Settles
	if _, err := p.conn.Prompt(context.Background(), text); err != nil {
		p.t.Fatalf("prompt %q: %v", text, err)
	}
	p.settle(n + 1)
}

// interrupt sends text and interrupts its run while the answer streams.
func (p *realPi) interrupt(text string) {
	p.t.Helper()
	defer p.late(p.base())
	n := p.conn.Turn().Settles
	if _, err := p.conn.Prompt(context.Background(), text); err != nil {
		p.t.Fatalf("prompt %q: %v", text, err)
	}
	time.Sleep(300 * time.Millisecond)
	if _, err := p.conn.Interrupt(context.Background(), "stop-1"); err != nil {
		p.t.Fatalf("interrupt: %v", err)
	}
	p.settle(n + 1)
}

func (p *realPi) base() *history.Snapshot {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

// late checks at once everything appended since base, as a watch whose
// poll came only now would: an entry Pi holds by reference may have
// changed since the quick poll vouched for it.
func (p *realPi) late(base *history.Snapshot) {
	p.t.Helper()
	snap, err := history.Follow(p.session, base, history.Options{})
	if err != nil {
		p.record("late check: %v", err)
		return
	}
	if len(snap.Appended()) == 0 {
		return
	}
	ours, err := heldAfter(context.Background(), p.conn, base, snap.Size())
	if err != nil {
		p.t.Fatalf("late check: get_entries: %v", err)
	}
	if id, what := unvouched(snap, ours); id != "" {
		p.record("late check: %s\nfile:   %s\nengine: %s", what, lineOf(snap, id), ours[id])
	}
}

// close ends the engine at stdin EOF, as a stop does, and the check.
func (p *realPi) close() {
	select {
	case <-p.stop:
		return
	default:
	}
	p.conn.Close()
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		p.t.Error("pi did not exit at stdin EOF")
	}
	close(p.stop)
	<-p.stopped
}

// TestRealPiAppendsAreVouched: every entry the pinned Pi appends to the
// session file, for each thing mosaic lets a user, an extension or Pi
// itself do, is vouched for by the session watch's check, which compares
// each appended line with the entry get_entries returns for it (W10). A
// false foreign writer closes admission on a conversation nobody touched.
func TestRealPiAppendsAreVouched(t *testing.T) {
	overflow := stubmodel.Turn{Error: "prompt is too long: 200000 tokens > 128000 maximum", Status: 400}
	cases := []struct {
		name   string
		script stubmodel.Script
		window int
		launch piLaunch
		// run drives the engine; the rig relaunches it for a resume.
		run  func(r *piRig, p *realPi)
		want []string // entry types that must have been compared
	}{
		{
			name:   "text tool and abort",
			script: stubmodel.Script{Turns: []stubmodel.Turn{{Text: []string{"Hi ", "\u00e9 \u2603"}, Tool: &stubmodel.ToolCall{Command: "printf 'x\\ty\\n\\u00e9'"}}, {Text: []string{"done"}}, {Endless: true, ChunkDelayMS: 30}}},
			run: func(r *piRig, p *realPi) {
				p.prompt("list the files \u00e9 \u2028 <b>")
				p.interrupt("go on")
				p.prompt("and again")
			},
			want: []string{"model_change", "thinking_level_change", "message"},
		},
		{
			name:   "launch with a thinking level on a reasoning model",
			launch: piLaunch{model: "fake-thinker", thinking: "high"},
			run:    func(r *piRig, p *realPi) { p.prompt("think") },
			want:   []string{"model_change", "thinking_level_change", "message"},
		},
		{
			name: "resume with another model and thinking level",
			run: func(r *piRig, p *realPi) {
				p.prompt("first")
				p.close()
				p = r.start(piLaunch{model: "fake-thinker", thinking: "medium"})
				p.prompt("second")
				p.close()
				p = r.start(piLaunch{})
				p.prompt("third")
			},
			want: []string{"message"},
		},
		{
			name:   "auto retry after a server error",
			script: stubmodel.Script{Turns: []stubmodel.Turn{{Error: "overloaded", Status: 503}, {Text: []string{"after the retry"}}}},
			run:    func(r *piRig, p *realPi) { p.prompt("retry me") },
			want:   []string{"message"},
		},
		{
			name:   "context overflow compaction",
			script: stubmodel.Script{Turns: []stubmodel.Turn{{Bulk: 120000}, overflow}},
			run: func(r *piRig, p *realPi) {
				p.prompt("write a lot")
				p.prompt("overflow now")
			},
			want: []string{"compaction", "message"},
		},
		{
			name:   "threshold compaction",
			script: stubmodel.Script{Turns: []stubmodel.Turn{{Bulk: 120000}}},
			window: 16500,
			run: func(r *piRig, p *realPi) {
				p.prompt("write a lot")
				p.prompt("small")
			},
			want: []string{"compaction", "message"},
		},
		{
			name:   "extension entries",
			launch: piLaunch{ext: true},
			run: func(r *piRig, p *realPi) {
				p.prompt("EXT_INJECT EXT_ENTRY EXT_MESSAGE EXT_NAME EXT_LABEL")
				p.prompt("EXT_MODEL")
				p.prompt("EXT_THINKING")
				p.prompt("more")
			},
			want: []string{"custom", "custom_message", "session_info", "label", "model_change", "thinking_level_change"},
		},
		{
			name:   "extension compaction",
			script: stubmodel.Script{Turns: []stubmodel.Turn{{Bulk: 120000}}},
			launch: piLaunch{ext: true},
			run: func(r *piRig, p *realPi) {
				p.prompt("write a lot")
				p.prompt("EXT_COMPACT")
				p.prompt("after")
			},
			want: []string{"compaction"},
		},
		{
			name:   "extension tool details share live objects",
			script: stubmodel.Script{Turns: []stubmodel.Turn{{Tool: &stubmodel.ToolCall{Name: "probe_todo", Args: json.RawMessage(`{}`)}}, {Tool: &stubmodel.ToolCall{Name: "probe_todo", Args: json.RawMessage(`{}`)}}, {Text: []string{"done"}}}},
			launch: piLaunch{ext: true},
			run:    func(r *piRig, p *realPi) { p.prompt("toggle twice") },
			want:   []string{"message"},
		},
		{
			name:   "extension changes a sent message's details",
			launch: piLaunch{ext: true},
			run:    func(r *piRig, p *realPi) { p.prompt("EXT_LIVE_NOTE") },
			want:   []string{"custom_message"},
		},
		{
			name:   "extension saves one state object twice",
			launch: piLaunch{ext: true},
			run:    func(r *piRig, p *realPi) { p.prompt("EXT_SAVE") },
			want:   []string{"custom"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newPiRig(t, tc.script, tc.window)
			tc.run(r, r.start(tc.launch))
			types := map[string]int{}
			var foreign []string
			for _, p := range r.started {
				p.close()
				p.mu.Lock()
				foreign = append(foreign, p.foreign...)
				for k, v := range p.types {
					types[k] += v
				}
				p.mu.Unlock()
			}
			for _, f := range foreign {
				t.Errorf("foreign: %s", f)
			}
			t.Logf("entries compared: %v", types)
			for _, k := range tc.want {
				if types[k] == 0 {
					t.Errorf("no %s entry was compared", k)
				}
			}
		})
	}
}
