package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/client"
	"github.com/mosaic-agents/mosaic/contrib/fakepi"
	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
	"github.com/mosaic-agents/mosaic/engine/pi"
	"github.com/mosaic-agents/mosaic/history"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/terminal"
)

// These tests drive `mosaicctl attach` in a real terminal (tmux, with a
// private server socket) against the real stack in the sandbox: installed
// units, socket activation, the controller, and the fake Pi as the pinned
// engine, which records every byte it reads on stdin.

const paneW, paneH = 120, 40

// fakeEngine installs the fake Pi where `conv add --engine` accepts it: a
// directory that is the pinned package (name, version, bin) whose pi entry
// is a shell script that execs fakepi with its evidence files set (the
// controller passes the engine no FAKEPI_* variables). It returns the
// entry and the stdin log; each engine process listens for pause points
// on ctl-<pid> in the log's directory.
func fakeEngine(t *testing.T, script stubmodel.Script) (entry, stdinLog string) {
	t.Helper()
	fake := sandboxtest.Bin(t, "fakepi")
	dir := t.TempDir()
	sj, _ := json.Marshal(script)
	scriptPath, stdinLog := filepath.Join(dir, "script.json"), filepath.Join(dir, "stdin.log")
	pkg, _ := json.Marshal(map[string]any{"name": pi.PinnedPackage, "version": pi.PinnedVersion, "bin": map[string]string{"pi": "pi.sh"}})
	// The package sits in its own directory: the pin covers every file
	// of it, and the fake's logs and control sockets change as it runs.
	pkgDir := filepath.Join(dir, "pkg")
	if err := os.Mkdir(pkgDir, 0o755); err != nil {
		t.Fatal(err)
	}
	entry = filepath.Join(pkgDir, "pi.sh")
	sh := fmt.Sprintf("#!/bin/sh\nexport FAKEPI_SCRIPT=%q FAKEPI_STDIN_LOG=%q FAKEPI_CONTROL=%q$$\nexec %q \"$@\"\n",
		scriptPath, stdinLog, filepath.Join(dir, "ctl-"), fake)
	for name, b := range map[string][]byte{"script.json": sj, "pkg/package.json": pkg, "pkg/pi.sh": []byte(sh)} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return entry, stdinLog
}

// promptsIn returns the prompt texts the engine received in stdin bytes.
func promptsIn(t *testing.T, b []byte) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		var c struct{ Type, Message string }
		if json.Unmarshal([]byte(line), &c) == nil && c.Type == "prompt" {
			out = append(out, c.Message)
		}
	}
	return out
}

// occurrences returns how many of ss equal s.
func occurrences(ss []string, s string) int {
	n := 0
	for _, x := range ss {
		if x == s {
			n++
		}
	}
	return n
}

// liveControl connects to the pause points of the engine that is running
// now (an engine that ended left its socket file behind).
func liveControl(t *testing.T, stdinLog string) *fakepi.Control {
	t.Helper()
	socks, _ := filepath.Glob(filepath.Join(filepath.Dir(stdinLog), "ctl-*"))
	for _, s := range socks {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c, err := fakepi.DialControl(ctx, s)
		cancel()
		if err == nil {
			t.Cleanup(func() { c.Close() })
			return c
		}
	}
	t.Fatalf("no live engine control socket among %v", socks)
	return nil
}

// libView is the client library's side: a connection that feeds a
// Transcript from its updates, as any client of the library does.
type libView struct {
	c       *client.Client
	mu      sync.Mutex
	tr      *client.Transcript
	settled int
	cursor  string // the observe reply's: reads the page before it
}

func dialLib(t *testing.T, path string) *libView {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, path, client.Options{Name: "attach-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	l := &libView{c: c, tr: client.NewTranscript()}
	go func() {
		for u := range c.Updates() {
			l.mu.Lock()
			if w := l.tr.Update(u); w.Observe {
				go c.Reobserve(context.Background(), w)
			}
			if u.Event != nil && u.Event.Kind == protocol.EventRunSettled {
				l.settled++
			}
			l.mu.Unlock()
		}
	}()
	obs, err := c.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l.cursor = obs.Cursor
	return l
}

// olders pages back from the observed page to the first part and returns
// the older history after each page read: none, one page, two, ….
func (l *libView) olders(t *testing.T, ctx context.Context) []terminal.Older {
	t.Helper()
	out := []terminal.Older{{}}
	for cursor := l.cursor; cursor != ""; {
		r, err := l.c.OlderPage(ctx, cursor)
		if err != nil {
			t.Fatal(err)
		}
		var p history.Page
		if err := json.Unmarshal(r.History, &p); err != nil {
			t.Fatal(err)
		}
		o := out[len(out)-1]
		o.Prepend(&p)
		out = append(out, o)
		cursor = r.Cursor
	}
	return out
}

// composed renders the library's transcript under older history, as the
// terminal composes them, at the pane's width.
func (l *libView) composed(o terminal.Older) []string {
	return terminal.Compose(o, l.tr.Snapshot()).Lines(paneW)
}

// activeLib waits for the engine through a library client and returns
// one that observed after it became active, so the library and a
// terminal attached now start at the same quiet cut.
func activeLib(t *testing.T, ctx context.Context, path string) *libView {
	t.Helper()
	lib := dialLib(t, path)
	for lib.c.State().Binding == nil || lib.c.State().Binding.State != protocol.BindingActive {
		time.Sleep(50 * time.Millisecond)
		if ctx.Err() != nil {
			t.Fatalf("the engine never became active: %+v", lib.c.State().Binding)
		}
	}
	return dialLib(t, path)
}

// lines renders the library's transcript as the terminal's renderer does,
// at the pane's width.
func (l *libView) lines() []string { return l.linesAt(paneW) }

func (l *libView) linesAt(width int) []string { return terminal.FromView(l.tr.Snapshot()).Lines(width) }

func (l *libView) runs() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.settled
}

// pane is a tmux session on a private server running one command.
type pane struct {
	t    *testing.T
	sock string
	name string
}

// startPane runs command in a new detached session of paneW x paneH. The
// command's shell stays after it, printing its exit status and the
// terminal modes it left behind, so a test can check the restore.
func startPane(t *testing.T, sock, name, command string) *pane {
	t.Helper()
	wrapped := command + `; echo "attach exited $? modes: $(stty -a | tr ' ;' '\n\n' | grep -x -e '-\?icanon' -e '-\?echo' | tr '\n' ' ')end"; sleep 3600`
	p := &pane{t: t, sock: sock, name: name}
	p.tmux("new-session", "-d", "-s", name, "-x", strconv.Itoa(paneW), "-y", strconv.Itoa(paneH), "sh", "-c", wrapped)
	return p
}

// on returns the pane for test t, so a subtest fails itself, not its
// parent.
func (p *pane) on(t *testing.T) *pane { return &pane{t: t, sock: p.sock, name: p.name} }

func (p *pane) tmux(args ...string) string {
	p.t.Helper()
	cmd := exec.Command("tmux", append([]string{"-S", p.sock}, args...)...)
	cmd.Env = append(os.Environ(), "TERM=xterm-256color")
	out, err := cmd.CombinedOutput()
	if err != nil {
		p.t.Fatalf("tmux %v: %v: %s", args, err, out)
	}
	return string(out)
}

// keys sends tmux key names (C-t, Enter, PageUp).
func (p *pane) keys(keys ...string) { p.tmux(append([]string{"send-keys", "-t", p.name}, keys...)...) }

// text sends literal text.
func (p *pane) text(s string) { p.tmux("send-keys", "-t", p.name, "-l", s) }

// raw sends exact bytes, as one write to the pane.
func (p *pane) raw(b string) {
	args := []string{"send-keys", "-t", p.name, "-H"}
	for i := 0; i < len(b); i++ {
		args = append(args, hex.EncodeToString([]byte{b[i]}))
	}
	p.tmux(args...)
}

// capture returns the pane's rows as plain text (escapes: with SGR).
func (p *pane) capture(escapes bool) []string {
	args := []string{"capture-pane", "-p", "-t", p.name}
	if escapes {
		args = append(args, "-e")
	}
	return strings.Split(strings.TrimSuffix(p.tmux(args...), "\n"), "\n")
}

// wait polls the screen until ok holds, within a generous bound.
func (p *pane) wait(what string, ok func(rows []string) bool) []string {
	p.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		rows := p.capture(false)
		if ok(rows) {
			return rows
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("the screen never showed %s:\n%s", what, strings.Join(rows, "\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// statusRow is the index of the status line (it starts with the
// conversation id), -1 when there is none.
func statusRow(rows []string, id string) int {
	for i, r := range rows {
		if strings.HasPrefix(r, id+" | ") {
			return i
		}
	}
	return -1
}

func status(rows []string, id string) string {
	if i := statusRow(rows, id); i >= 0 {
		return rows[i]
	}
	return ""
}

// notice is the notice row, under the status line.
func notice(rows []string, id string) string {
	if i := statusRow(rows, id); i >= 0 && i+1 < len(rows) {
		return rows[i+1]
	}
	return ""
}

// composer is the text of the rows under the notice row.
func composer(rows []string, id string) []string {
	i := statusRow(rows, id)
	if i < 0 || i+2 > len(rows) {
		return nil
	}
	var out []string
	for _, r := range rows[i+2:] {
		if r != "" {
			out = append(out, r)
		}
	}
	return out
}

// sameTranscript reports whether the rows above the status line are the
// library's lines as the viewport shows them: the last rows of lines
// (the viewport follows the end), then blank rows.
func sameTranscript(rows []string, id string, lines []string) bool {
	n := statusRow(rows, id)
	if n < 0 {
		return false
	}
	return sameLines(rows[:n], lines[max(len(lines)-n, 0):])
}

func TestAttachOutcomes(t *testing.T) {
	lost := &client.OutcomeError{Command: protocol.Command{Type: protocol.CmdPrompt}, Err: client.ErrClosed}
	for _, tc := range []struct {
		name string
		r    *protocol.Receipt
		err  error
		want terminal.Outcome
	}{
		{"acknowledged", &protocol.Receipt{State: protocol.ReceiptAcknowledged}, nil, terminal.Outcome{Kind: terminal.Admitted}},
		{"engine failed", &protocol.Receipt{State: protocol.ReceiptFailed, Evidence: "No API key"}, nil,
			terminal.Outcome{Kind: terminal.Refused, Code: "the engine refused it: No API key"}},
		{"delivery unknown", &protocol.Receipt{State: protocol.ReceiptDeliveryUnknown}, nil, terminal.Outcome{Kind: terminal.Lost}},
		{"reply lost", nil, fmt.Errorf("prompt: %w", lost), terminal.Outcome{Kind: terminal.Lost}},
		{"refused", nil, fmt.Errorf("prompt: %w", &protocol.Refusal{Code: "busy", Message: "a turn is running"}),
			terminal.Outcome{Kind: terminal.Refused, Code: "busy: a turn is running"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := outcomeOf(tc.r, tc.err); got != tc.want {
				t.Fatalf("outcomeOf = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestAttachDialogFacts(t *testing.T) {
	st := client.State{Conversation: "pi-1", Binding: &protocol.Binding{Scope: "mosaic-engine-x.scope", Cohort: "scope",
		Engine: "pi 0.85.1", EngineState: "busy", SessionID: "s1", Leaf: "l9"}}
	cf := &protocol.Confirmation{Operation: protocol.CmdForceStop, Execution: "e-1", Generation: 4,
		Intent: "force stop execution e-1: kill every process in mosaic-engine-x.scope (2 processes)", Expires: "soon"}
	d := dialogFor(cf, st)
	want := [][2]string{{"conversation", "pi-1"}, {"execution", "e-1"}, {"generation", "4"}, {"scope", "mosaic-engine-x.scope"},
		{"cohort", "scope"}, {"engine", "pi 0.85.1 (busy)"}, {"intent", cf.Intent}, {"expires", "soon"}}
	if d.Title != "force stop" || !reflect.DeepEqual(d.Facts, want) {
		t.Fatalf("force stop dialog %q: %q", d.Title, d.Facts)
	}
	cf.Operation, cf.StopContext = protocol.CmdRecover, "st-7"
	d = dialogFor(cf, st)
	want = [][2]string{{"conversation", "pi-1"}, {"execution", "e-1"}, {"generation", "4"}, {"session", "s1"},
		{"stop", "st-7"}, {"intent", cf.Intent}, {"expires", "soon"}}
	if d.Title != "recover" || !reflect.DeepEqual(d.Facts, want) {
		t.Fatalf("recover dialog %q: %q", d.Title, d.Facts)
	}
	st.Binding.State, st.Binding.Admission, st.Binding.AdmissionReason, st.Binding.Controller = "uncertain", "closed", "found uncertain claim", "c-old"
	cf.Operation, cf.StopContext = protocol.CmdAcquireRecoveryControl, ""
	d = dialogFor(cf, st)
	want = [][2]string{{"conversation", "pi-1"}, {"execution", "e-1"}, {"generation", "4"}, {"binding", "uncertain"},
		{"admission", "closed (found uncertain claim)"}, {"controller", "c-old"}, {"controller connected", "no"},
		{"intent", cf.Intent}, {"expires", "soon"}}
	if d.Title != "take recovery control" || !reflect.DeepEqual(d.Facts, want) {
		t.Fatalf("recovery control dialog %q: %q", d.Title, d.Facts)
	}
}

func TestAttachInTmux(t *testing.T) {
	sandboxtest.Require(t)
	bin := sandboxtest.Bin(t, "mosaicctl")
	if _, err := exec.LookPath("tmux"); err != nil {
		sandboxtest.Unavailable(t, "tmux is not installed: %v", err)
	}
	entry, stdinLog := fakeEngine(t, stubmodel.Script{Turns: []stubmodel.Turn{
		{Text: []string{"Hello \x1b[31mRED\x1b[0m ", "bidi \u202eevil\u202c done."}, Tool: &stubmodel.ToolCall{Command: "echo tool-output"}},
		{Text: []string{"The tool ", "said tool-output."}},
	}})
	id, _, path := startConversation(t, bin, "attach", "--engine", entry, "--provider", "fakellm", "--model", "fake-model")
	svc := "mosaic-conv@" + id + ".service"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	lib := activeLib(t, ctx, path)

	tsock := filepath.Join(t.TempDir(), "tmux.sock")
	t.Cleanup(func() { exec.Command("tmux", "-S", tsock, "kill-server").Run() })
	// A long escape timeout: the split-paste case sends its halves in two
	// tmux commands, and the parser must hold the half marker between them.
	p := startPane(t, tsock, "attach", bin+" attach --escape-timeout 30s "+id)
	// The binding comes with the welcome, before the observe is answered:
	// the page's head says the observe was, so a prompt after it finds a
	// quiet cut (one sent before it, on a loaded machine, made the
	// terminal mark a reconcile the library's earlier observe did not).
	p.wait("the status line of an observer with an active engine, and its first page", func(rows []string) bool {
		s := status(rows, id)
		return strings.Contains(s, " | observer | ") && strings.Contains(s, "binding active") &&
			strings.Contains(strings.Join(rows, "\n"), "-- beginning of the conversation --")
	})
	stdin := func() []byte { b, _ := os.ReadFile(stdinLog); return b }
	// submit takes control in the terminal, types text and Enter, and
	// checks that the engine received exactly that prompt, and only it.
	submit := func(t *testing.T, text string) {
		t.Helper()
		p := p.on(t)
		p.keys("C-t")
		p.wait("controller mode", func(rows []string) bool { return strings.Contains(status(rows, id), " | controller | ") })
		before, runs := len(stdin()), lib.runs()
		p.text(text)
		p.keys("Enter")
		waitFor(t, func() bool { return lib.runs() > runs })
		if got := promptsIn(t, stdin()[before:]); !reflect.DeepEqual(got, []string{text}) {
			t.Fatalf("engine prompts %q; want exactly %q", got, text)
		}
	}

	t.Run("E7 observer renders the library's stream, tool call and inert text included", func(t *testing.T) {
		p := p.on(t)
		if _, err := lib.c.Takeover(ctx); err != nil {
			t.Fatal(err)
		}
		// Hold the engine while its tool runs: both sides show the tool's
		// progress item, the same way.
		fc := liveControl(t, stdinLog)
		if err := fc.Arm(ctx, fakepi.PointToolRunning); err != nil {
			t.Fatal(err)
		}
		if r, err := lib.c.Prompt(ctx, "first question"); err != nil || r.State != protocol.ReceiptAcknowledged {
			t.Fatalf("prompt: %v %+v", err, r)
		}
		if _, err := fc.Wait(ctx, fakepi.PointToolRunning); err != nil {
			t.Fatal(err)
		}
		var running []string
		waitFor(t, func() bool {
			running = lib.lines()
			return strings.Contains(strings.Join(running, "\n"), "[tool bash running]")
		})
		// Both sides may get the tool's progress after the snapshot above:
		// compare with the library as it is at each look, not as it was.
		p.wait("the library's transcript while the tool runs", func(rows []string) bool {
			running = lib.lines()
			return sameTranscript(rows, id, running)
		})
		if err := fc.Release(ctx, fakepi.PointToolRunning); err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool { return lib.runs() >= 1 })
		want := lib.lines()
		rows := p.wait("the library's transcript", func(rows []string) bool { return sameTranscript(rows, id, want) })
		screen := strings.Join(rows, "\n")
		for _, s := range []string{"first question", "Hello ^[[31mRED^[[0m bidi <U+202E>evil<U+202C> done.", "tool-output", "said tool-output."} {
			if !strings.Contains(screen, s) {
				t.Errorf("the screen lacks %q:\n%s", s, screen)
			}
		}
		if !strings.Contains(status(rows, id), " | observer | ") {
			t.Errorf("status %q; want observer", status(rows, id))
		}
		// Inert: no cell took the engine's red.
		if withSGR := strings.Join(p.capture(true), "\n"); strings.Contains(withSGR, "\x1b[31m") || strings.Contains(withSGR, "\u202e") {
			t.Errorf("engine escapes reached the terminal:\n%q", withSGR)
		}
	})

	t.Run("E7 controller takes control, submits, and renders the library's stream", func(t *testing.T) {
		p := p.on(t)
		submit(t, "second question")
		var want []string
		p.wait("the library's transcript", func(rows []string) bool {
			want = lib.lines()
			return sameTranscript(rows, id, want)
		})
		if lib.c.State().Mode != client.ModeObserver {
			t.Fatalf("the library client is %s after the terminal took control", lib.c.State().Mode)
		}
	})

	t.Run("S4 composer cleared when control transfers and returns", func(t *testing.T) {
		p := p.on(t)
		p.text("/abandoned")
		p.wait("the typed text", func(rows []string) bool { return reflect.DeepEqual(composer(rows, id), []string{"> /abandoned"}) })
		if _, err := lib.c.Takeover(ctx); err != nil {
			t.Fatal(err)
		}
		p.wait("a cleared composer as observer", func(rows []string) bool {
			return reflect.DeepEqual(composer(rows, id), []string{">"}) && strings.Contains(status(rows, id), " | observer | ") &&
				strings.Contains(notice(rows, id), "composer cleared")
		})
		submit(t, "s4 text")
	})

	t.Run("taking control keeps the typed text as a draft that Ctrl-Y restores and only Enter sends", func(t *testing.T) {
		p := p.on(t)
		// S4 above kept its cleared "/abandoned" aside, unsent: Ctrl-Y
		// shows it again; erase it.
		p.wait("the kept draft", func(rows []string) bool { return strings.Contains(status(rows, id), " | draft kept (Ctrl-Y)") })
		p.keys("C-y")
		p.wait("S4's draft restored", func(rows []string) bool { return reflect.DeepEqual(composer(rows, id), []string{"> /abandoned"}) })
		p.keys("BSpace", "BSpace", "BSpace", "BSpace", "BSpace", "BSpace", "BSpace", "BSpace", "BSpace", "BSpace")
		p.wait("an empty composer", func(rows []string) bool { return reflect.DeepEqual(composer(rows, id), []string{">"}) })
		if _, err := lib.c.Takeover(ctx); err != nil {
			t.Fatal(err)
		}
		p.wait("observer mode", func(rows []string) bool { return strings.Contains(status(rows, id), " | observer | ") })
		p.text("draft question")
		p.wait("the typed text", func(rows []string) bool { return reflect.DeepEqual(composer(rows, id), []string{"> draft question"}) })
		before, runs := len(stdin()), lib.runs()
		p.keys("C-t")
		p.wait("controller mode, an empty composer and how to restore", func(rows []string) bool {
			// The notice of the change is replaced at once by the
			// takeover's outcome; the status line keeps the draft.
			return strings.Contains(status(rows, id), " | controller | ") && reflect.DeepEqual(composer(rows, id), []string{">"}) &&
				strings.HasSuffix(status(rows, id), " | draft kept (Ctrl-Y)")
		})
		p.keys("C-y")
		p.wait("the draft back in the composer", func(rows []string) bool {
			return reflect.DeepEqual(composer(rows, id), []string{"> draft question"}) && !strings.Contains(status(rows, id), "draft kept")
		})
		if after := stdin()[before:]; strings.Contains(string(after), "draft question") || len(promptsIn(t, after)) != 0 {
			t.Fatalf("the transfer or the restore sent something to the engine: %q", after)
		}
		p.keys("Enter")
		waitFor(t, func() bool { return lib.runs() > runs })
		if got := promptsIn(t, stdin()[before:]); !reflect.DeepEqual(got, []string{"draft question"}) {
			t.Fatalf("engine prompts %q; want exactly the restored draft", got)
		}
	})

	t.Run("? on an empty composer shows the key legend and types nothing", func(t *testing.T) {
		p := p.on(t)
		p.wait("an empty composer", func(rows []string) bool { return reflect.DeepEqual(composer(rows, id), []string{">"}) })
		p.text("?")
		p.wait("the legend", func(rows []string) bool {
			// The legend's rows, from the notice row down to the
			// composer, read whole as the legend.
			c := composer(rows, id)
			if len(c) == 0 || c[len(c)-1] != ">" {
				return false
			}
			return strings.Join(append([]string{notice(rows, id)}, c[:len(c)-1]...), " ") == terminal.Legend
		})
		p.text("?")
		p.wait("a typed ?", func(rows []string) bool { return reflect.DeepEqual(composer(rows, id), []string{"> ?"}) })
		p.keys("BSpace")
		p.wait("an empty composer", func(rows []string) bool { return reflect.DeepEqual(composer(rows, id), []string{">"}) })
	})

	t.Run("S5 observer paste and Enter sends nothing and keeps the text", func(t *testing.T) {
		p := p.on(t)
		if _, err := lib.c.Takeover(ctx); err != nil {
			t.Fatal(err)
		}
		p.wait("observer mode", func(rows []string) bool { return strings.Contains(status(rows, id), " | observer | ") })
		before := stdin()
		p.raw("\x1b[200~pasted\nby a script\x1b[201~")
		p.keys("Enter")
		p.wait("the refusal with the text kept", func(rows []string) bool {
			return notice(rows, id) == terminal.ErrNotController.Message &&
				reflect.DeepEqual(composer(rows, id), []string{"> pasted", "  by a script"})
		})
		// The controller polls the engine meanwhile (get_entries), so the
		// check is that nothing of the paste and no prompt reached it.
		if after := stdin()[len(before):]; strings.Contains(string(after), "pasted") || len(promptsIn(t, after)) != 0 {
			t.Fatalf("the engine read %q after an observer's Enter", after)
		}
	})

	t.Run("S7 a paste with split markers is literal, never submits, and is sent exactly", func(t *testing.T) {
		p := p.on(t)
		p.keys("C-t")
		p.wait("controller mode with a cleared composer", func(rows []string) bool {
			return strings.Contains(status(rows, id), " | controller | ") && reflect.DeepEqual(composer(rows, id), []string{">"})
		})
		paste := "line one\nline two\r\x1b[31mred\u2028end \x1b[200~nested"
		before := stdin()
		// The start marker split after its ESC and inside its digits, the
		// end marker split too: five writes, in separate tmux commands.
		for _, chunk := range []string{"\x1b", "[20", "0~" + paste[:12], paste[12:] + "\x1b[2", "01~"} {
			p.raw(chunk)
			time.Sleep(100 * time.Millisecond) // let each write be its own read
		}
		p.wait("the pasted lines in the composer", func(rows []string) bool {
			return reflect.DeepEqual(composer(rows, id), []string{"> line one", "  line two^M^[[31mred<U+2028>end ^[[200~nested"})
		})
		if after := stdin()[len(before):]; strings.Contains(string(after), "line one") || len(promptsIn(t, after)) != 0 {
			t.Fatalf("a paste submitted: the engine read %q", after)
		}
		runs := lib.runs()
		p.keys("Enter")
		waitFor(t, func() bool { return lib.runs() > runs })
		if got := promptsIn(t, stdin()[len(before):]); !reflect.DeepEqual(got, []string{paste}) {
			t.Fatalf("engine prompts %q; want exactly %q", got, paste)
		}
	})

	t.Run("force stop and recover ask y/N showing what they act on", func(t *testing.T) {
		p := p.on(t)
		b := lib.c.State().Binding
		if b == nil || b.Scope == "" || b.Execution == "" {
			t.Fatalf("binding %+v: want an execution in a scope", b)
		}
		dialog := func(title string) func(rows []string) bool {
			return func(rows []string) bool {
				s := strings.Join(rows, "\n")
				return strings.Contains(s, "== "+title+" ==") && strings.Contains(s, "  conversation: "+id) &&
					strings.Contains(s, "  intent: ") && strings.Contains(s, "y confirms")
			}
		}
		p.keys("C-x")
		rows := p.wait("the force stop dialog", dialog("force stop"))
		s := strings.Join(rows, "\n")
		for _, want := range []string{"  execution: " + b.Execution, "  scope: " + b.Scope, "  cohort: " + b.Cohort} {
			if !strings.Contains(s, want) {
				t.Errorf("the dialog lacks %q:\n%s", want, s)
			}
		}
		// The intent wraps at spaces; nothing of it is cut.
		if words := strings.Join(strings.Fields(s), " "); !strings.Contains(words, "intent: force stop execution "+b.Execution+": kill every process in "+b.Scope+" (2 processes: ") ||
			!strings.Contains(words, " mosaic-held, ") ||
			!strings.Contains(words, "nothing is rolled back") {
			t.Errorf("the dialog does not show the whole intent:\n%s", s)
		}
		p.text("n")
		p.wait("the cancel", func(rows []string) bool { return notice(rows, id) == "force-stop cancelled" })
		if st := lib.c.State().Binding.State; st != protocol.BindingActive {
			t.Fatalf("binding %s after a declined force stop", st)
		}

		p.keys("C-x")
		p.wait("the force stop dialog", dialog("force stop"))
		p.text("y")
		// The notice is the receipt or the stop record, whichever came last.
		p.wait("a stopped engine", func(rows []string) bool {
			return strings.Contains(notice(rows, id), "stopped") && strings.Contains(status(rows, id), "binding stopped")
		})

		p.keys("C-r")
		rows = p.wait("the recover dialog", dialog("recover"))
		if s := strings.Join(rows, "\n"); !strings.Contains(s, "  stop: ") {
			t.Errorf("the recover dialog does not name the stop:\n%s", s)
		}
		p.text("y")
		p.wait("a launched execution", func(rows []string) bool {
			return strings.Contains(status(rows, id), "binding active") && !strings.Contains(notice(rows, id), "refused")
		})
		if nb := lib.c.State().Binding; nb.Execution == b.Execution {
			t.Fatalf("the execution is still %s after recover", nb.Execution)
		}
	})

	t.Run("a resize redraws at the new size", func(t *testing.T) {
		p := p.on(t)
		p.tmux("resize-window", "-t", p.name, "-x", "70", "-y", "20")
		want := lib.linesAt(70)
		rows := p.wait("the transcript at 70 columns", func(rows []string) bool {
			return len(rows) == 20 && statusRow(rows, id) == 17 && sameTranscript(rows, id, want)
		})
		for _, r := range rows {
			if terminal.Width(r) > 70 {
				t.Fatalf("row %q is wider than the pane", r)
			}
		}
		p.tmux("resize-window", "-t", p.name, "-x", strconv.Itoa(paneW), "-y", strconv.Itoa(paneH))
		p.wait("the full size again", func(rows []string) bool { return len(rows) == paneH && statusRow(rows, id) == paneH-3 })
	})

	// The prompt is queued durably before it is written to the engine, so
	// its admission is answered; what stopping the controller loses is the
	// dispatch's answer. The restarted controller settles the item from
	// the session file and never writes it again.
	t.Run("a lost dispatch is never resent", func(t *testing.T) {
		p := p.on(t)
		fc := liveControl(t, stdinLog)
		if err := fc.Arm(ctx, fakepi.PointPromptReceived); err != nil {
			t.Fatal(err)
		}
		p.keys("C-t") // refused already-controller unless control moved
		p.wait("controller mode", func(rows []string) bool { return strings.Contains(status(rows, id), " | controller | ") })
		p.text("lost one")
		p.keys("Enter")
		if _, err := fc.Wait(ctx, fakepi.PointPromptReceived); err != nil {
			t.Fatal(err)
		}
		// The prompt is in the engine, its reply held: lose the
		// controller (a plain stop would end the engine with a proof).
		loseController(t, svc)
		p.wait("the disconnect, the composer empty", func(rows []string) bool {
			return strings.Contains(status(rows, id), "disconnected") && reflect.DeepEqual(composer(rows, id), []string{">"})
		})
		p.keys("C-o")
		p.wait("a new connection as observer", func(rows []string) bool {
			s := status(rows, id)
			return strings.Contains(s, " | observer | ") && !strings.Contains(s, "disconnected")
		})
		if n := occurrences(promptsIn(t, stdin()), "lost one"); n != 1 {
			t.Fatalf("the engine read the lost prompt %d times; want exactly once (no resend)", n)
		}
	})

	t.Run("after the controller is lost: recovery control, force stop, recover, prompt", func(t *testing.T) {
		p := p.on(t)
		// The restarted controller found the engine alive without a
		// controller: admission closed. Ctrl-T is refused fenced, and the
		// terminal asks for recovery control instead.
		p.keys("C-t")
		rows := p.wait("the recovery control dialog", func(rows []string) bool {
			return strings.Contains(strings.Join(rows, "\n"), "== take recovery control ==")
		})
		if s := strings.Join(strings.Fields(strings.Join(rows, "\n")), " "); !strings.Contains(s, "admission: closed (") ||
			!strings.Contains(s, "intent: take recovery control of conversation "+id) {
			t.Fatalf("the dialog does not say what it does:\n%s", strings.Join(rows, "\n"))
		}
		p.text("y")
		p.wait("recovery control", func(rows []string) bool { return strings.Contains(status(rows, id), " | controller | ") })
		p.keys("C-x")
		p.wait("the force stop dialog", func(rows []string) bool { return strings.Contains(strings.Join(rows, "\n"), "== force stop ==") })
		p.text("y")
		p.wait("a stopped engine", func(rows []string) bool { return strings.Contains(status(rows, id), "binding stopped") })
		p.keys("C-r")
		p.wait("the recover dialog", func(rows []string) bool { return strings.Contains(strings.Join(rows, "\n"), "== recover ==") })
		p.text("y")
		p.wait("a launched execution", func(rows []string) bool {
			s := status(rows, id)
			return strings.Contains(s, " | controller | ") && strings.Contains(s, "binding active")
		})
		p.text("after recovery")
		p.keys("Enter")
		p.wait("the prompt and its settled run", func(rows []string) bool {
			s := strings.Join(rows, "\n")
			i := strings.LastIndex(s, "\n  after recovery\n")
			return i >= 0 && strings.LastIndex(s, "-- run settled --") > i
		})
		if n := occurrences(promptsIn(t, stdin()), "after recovery"); n != 1 {
			t.Fatalf("the engine read the prompt %d times", n)
		}
	})

	t.Run("quit restores the terminal", func(t *testing.T) {
		p := p.on(t)
		p.keys("C-c")
		p.wait("the shell after attach, its terminal restored", func(rows []string) bool {
			return strings.Contains(strings.Join(rows, "\n"), "attach exited 0 modes: icanon echo end")
		})
		if alt := strings.TrimSpace(p.tmux("display", "-p", "-t", p.name, "#{alternate_on}")); alt != "0" {
			t.Fatalf("still on the alternate screen after quit (alternate_on=%s)", alt)
		}
	})

	t.Run("SIGTERM restores the terminal", func(t *testing.T) {
		q := startPane(t, tsock, "term", bin+" attach "+id)
		q.wait("the status line", func(rows []string) bool { return statusRow(rows, id) >= 0 })
		pid := strings.TrimSpace(q.tmux("display", "-p", "-t", q.name, "#{pane_pid}"))
		kids, err := os.ReadFile("/proc/" + pid + "/task/" + pid + "/children")
		if err != nil || len(strings.Fields(string(kids))) != 1 {
			t.Fatalf("children of the pane's shell: %q %v", kids, err)
		}
		child, _ := strconv.Atoi(strings.Fields(string(kids))[0])
		if err := syscall.Kill(child, syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		q.wait("the shell after attach, its terminal restored", func(rows []string) bool {
			return strings.Contains(strings.Join(rows, "\n"), "attach exited 0 modes: icanon echo end")
		})
	})
}

// TestAttachPagesBackInTmux pages a conversation of three history pages
// back to its first message in the terminal: each read page is prepended
// without moving the rows on screen, the screen is always the library's
// lines under the same older pages, and paging down again shows every
// message exactly once.
func TestAttachPagesBackInTmux(t *testing.T) {
	sandboxtest.Require(t)
	bin := sandboxtest.Bin(t, "mosaicctl")
	if _, err := exec.LookPath("tmux"); err != nil {
		sandboxtest.Unavailable(t, "tmux is not installed: %v", err)
	}
	entry, _ := fakeEngine(t, stubmodel.Script{})
	id, proj, path := startConversation(t, bin, "pages", "--engine", entry, "--provider", "fakellm", "--model", "fake-model")
	// 250 messages are three pages (history.MaxPageParts is 100). The
	// controller starts on the first connection, after the file is there.
	const n = 250
	writePiSession(t, filepath.Join(proj, ".pi", "state", "pages", "sessions", "main.jsonl"), proj, n)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	lib := activeLib(t, ctx, path)
	olders := lib.olders(t, ctx)
	if len(olders) < 3 {
		t.Fatalf("%d older pages; want at least 2 (three pages in all)", len(olders)-1)
	}

	tsock := filepath.Join(t.TempDir(), "tmux.sock")
	t.Cleanup(func() { exec.Command("tmux", "-S", tsock, "kill-server").Run() })
	p := startPane(t, tsock, "pages", bin+" attach "+id)

	t.Run("PageUp reads every older page back to the first message, each once", func(t *testing.T) {
		p := p.on(t)
		first := lib.composed(olders[0])
		p.wait("the newest page, as the library shows it", func(rows []string) bool {
			return strings.Contains(status(rows, id), "binding active") && sameTranscript(rows, id, first)
		})
		if first[0] != marker(terminal.MarkerMore) {
			t.Fatalf("the newest page starts with %q", first[0])
		}
		for i := 1; i < len(olders); i++ {
			before, want := lib.composed(olders[i-1]), lib.composed(olders[i])
			// PageUp until page i is read: the transcript is as long as
			// the library's under i older pages.
			rows := p.capture(false)
			for scrollOf(rows, id)[2] != len(want) {
				if rows[0] != marker(terminal.MarkerLoading) {
					st := status(rows, id)
					p.keys("PageUp")
					rows = p.wait("the viewport moving or a page loading", func(rows []string) bool {
						return status(rows, id) != st || rows[0] == marker(terminal.MarkerLoading)
					})
					continue
				}
				rows = p.wait("the page read", func(rows []string) bool { return rows[0] != marker(terminal.MarkerLoading) })
			}
			// The reader was at the top: the page went above the viewport,
			// which now starts where the old first line (the marker) was
			// pushed down to.
			sc := scrollOf(rows, id)
			if grew := len(want) - len(before); sc[0]-1 != grew {
				t.Fatalf("after page %d the viewport starts at line %d; the page added %d lines above the old top", i, sc[0], grew)
			}
			sr := statusRow(rows, id)
			if !sameLines(rows[:sr], want[sc[0]-1:]) || !sameLines(rows[1:sr], before[1:]) {
				t.Fatalf("after page %d the screen is not the library's lines %d-%d, nor the rows it showed:\n%s",
					i, sc[0], sc[1], strings.Join(rows, "\n"))
			}
		}
		all := lib.composed(olders[len(olders)-1])
		if all[0] != marker(terminal.MarkerBeginning) {
			t.Fatalf("the composed transcript starts with %q", all[0])
		}
		rows := p.capture(false)
		for rows[0] != marker(terminal.MarkerBeginning) {
			st := status(rows, id)
			p.keys("PageUp")
			rows = p.wait("the viewport moving up", func(rows []string) bool { return status(rows, id) != st })
		}
		// Page down to the end, putting each row where the status says it
		// is: the screen shows exactly the composed lines.
		seen := make([]string, len(all))
		for {
			sr := statusRow(rows, id)
			sc := scrollOf(rows, id)
			if sc[2] == 0 { // following the end again
				if !sameTranscript(rows, id, all) {
					t.Fatalf("at the end the screen is not the library's lines:\n%s", strings.Join(rows, "\n"))
				}
				copy(seen[len(all)-sr:], rows[:sr])
				break
			}
			if sc[2] != len(all) || !sameLines(rows[:sr], all[sc[0]-1:]) {
				t.Fatalf("lines %d-%d of %d are not the library's %d lines:\n%s", sc[0], sc[1], sc[2], len(all), strings.Join(rows, "\n"))
			}
			copy(seen[sc[0]-1:], rows[:sr])
			st := status(rows, id)
			p.keys("PageDown")
			rows = p.wait("the viewport moving down", func(rows []string) bool { return status(rows, id) != st })
		}
		if !sameLines(seen, all) {
			t.Fatalf("paging down showed\n%s\nwant\n%s", strings.Join(seen, "\n"), strings.Join(all, "\n"))
		}
		text := "\n" + strings.Join(seen, "\n") + "\n"
		for i := range n {
			if c := strings.Count(text, fmt.Sprintf("\n  message %d\n", i)); c != 1 {
				t.Fatalf("message %d shown %d times", i, c)
			}
		}
	})

	t.Run("a refused cursor re-reads the newest page, says so, and paging back works again", func(t *testing.T) {
		p := p.on(t)
		// Ctrl-O: a fresh page and a cursor chain on attach's connection.
		p.keys("C-o")
		first := lib.composed(olders[0])
		// Until the page comes the old lines stay on screen, under "re-reading
		// the page".
		p.wait("the newest page again", func(rows []string) bool {
			return scrollOf(rows, id)[2] == 0 && notice(rows, id) == rereadDone && sameTranscript(rows, id, first)
		})
		// The controller keeps 1000 cursors in all, least recently used
		// out: a thousand pages read by the library's connection evict
		// attach's cursor, so its next read back is refused cursor-unknown.
		// They are read before each PageUp that may read a page (the one that
		// reaches the top does), not once: a cursor attach was given after
		// them (an observe of its own still answering) would outlive a single
		// round and let it page back to the beginning unrefused.
		evict := func() {
			for range 1000 {
				if _, err := lib.c.OlderPage(ctx, lib.cursor); err != nil {
					t.Fatal(err)
				}
			}
		}
		rows := p.capture(false)
		for !strings.Contains(notice(rows, id), "cursor-unknown") {
			if rows[0] == marker(terminal.MarkerBeginning) {
				t.Fatalf("paged back to the beginning, each cursor evicted before its read, and no read was refused:\n%s", strings.Join(rows, "\n"))
			}
			// Following the end (no "lines" in the status), or a viewport
			// from the top: a PageUp moves the viewport by its height less
			// one line (terminal.Screen's step).
			if sc := scrollOf(rows, id); sc[2] == 0 || sc[0] <= sc[1]-sc[0]+2 {
				evict()
			}
			st := status(rows, id)
			p.keys("PageUp")
			rows = p.wait("the viewport moving or the refusal", func(rows []string) bool {
				return status(rows, id) != st || strings.Contains(notice(rows, id), "cursor-unknown")
			})
		}
		if got, want := notice(rows, id), "older history refused (cursor-unknown): re-reading from the newest page"; got != want {
			t.Fatalf("notice %q, want %q", got, want)
		}
		// Paging back works again: PageUp, pressed again while a read is
		// pending or before the re-read page gave a new cursor (both are
		// ignored), reaches the beginning, and the screen is the library's
		// lines of the whole branch. (The newest page looks the same before
		// and after the re-read, so the re-read itself is not waited for.)
		all := lib.composed(olders[len(olders)-1])
		rows = p.wait("the beginning, paging back again", func(rows []string) bool {
			if strings.Contains(rows[0], "beginning of the conversation") {
				return true
			}
			p.keys("PageUp")
			return false
		})
		if sc := scrollOf(rows, id); sc[2] != len(all) || !sameLines(rows[:statusRow(rows, id)], all[sc[0]-1:]) {
			t.Fatalf("after the re-read and paging back the screen is not the library's lines %d-%d of %d (want %d):\n%s",
				sc[0], sc[1], sc[2], len(all), strings.Join(rows, "\n"))
		}
	})
}

// marker is the row a transcript marker (terminal.Marker*) takes.
func marker(s string) string { return "-- " + s + " --" }

// scrollOf reads "lines A-B of N" from the status line: A, B, N, or zeros
// when the viewport follows the end.
func scrollOf(rows []string, id string) [3]int {
	var sc [3]int
	st := status(rows, id)
	if i := strings.Index(st, "lines "); i >= 0 {
		fmt.Sscanf(st[i:], "lines %d-%d of %d", &sc[0], &sc[1], &sc[2])
	}
	return sc
}

// sameLines reports whether rows are the first len(rows) of lines, as a
// pane shows them (trailing blanks trimmed; blank rows past the end).
func sameLines(rows, lines []string) bool {
	for i, r := range rows {
		w := ""
		if i < len(lines) {
			w = strings.TrimRight(lines[i], " ")
		}
		if strings.TrimRight(r, " ") != w {
			return false
		}
	}
	return true
}

// writePiSession writes a Pi v3 session file of n messages ("message 0"
// …), alternately user and assistant, each the child of the one before.
func writePiSession(t *testing.T, path, cwd string, n int) {
	t.Helper()
	var b strings.Builder
	hdr, _ := json.Marshal(map[string]any{"type": "session", "version": 3, "id": "0196f5a0-0000-7000-8000-00000000a77a",
		"timestamp": "2026-12-01T00:00:00.000Z", "cwd": cwd})
	b.Write(append(hdr, '\n'))
	parent := any(nil)
	for i := range n {
		id := fmt.Sprintf("m%05d", i)
		line, _ := json.Marshal(map[string]any{"type": "message", "id": id, "parentId": parent, "timestamp": "2026-12-01T00:00:01.000Z",
			"message": map[string]any{"role": []string{"user", "assistant"}[i%2],
				"content": []map[string]string{{"type": "text", "text": fmt.Sprintf("message %d", i)}}}})
		b.Write(append(line, '\n'))
		parent = id
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}
