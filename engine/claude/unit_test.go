package claude

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/protocol"
)

const testSession = "11111111-2222-4333-8444-555555555555"

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	var r *protocol.Refusal
	if !errors.As(err, &r) || r.Code != code {
		t.Fatalf("err = %v, want refusal %s", err, code)
	}
}

// TestSealArgs: only the allow-listed argv passes.
func TestSealArgs(t *testing.T) {
	good, err := Seal{Session: testSession, Model: "claude-opus-5-5"}.Args()
	if err != nil {
		t.Fatal(err)
	}
	if want := append(slices.Clone(baseArgs), "--session-id", testSession, "--model", "claude-opus-5-5"); !slices.Equal(good, want) {
		t.Fatalf("args %q", good)
	}
	res, _ := Seal{Session: testSession, Resume: true}.Args()
	if res[len(res)-2] != "--resume" {
		t.Fatalf("resume args %q", res)
	}
	base := append(slices.Clone(baseArgs), "--session-id", testSession)
	bad := map[string][]string{
		"fork":           append(slices.Clone(base), "--fork-session"),
		"skip perms":     append(slices.Clone(base), "--dangerously-skip-permissions"),
		"prompt word":    append(slices.Clone(base), "hello"),
		"not uuid":       append(slices.Clone(baseArgs), "--session-id", "../x"),
		"model flag":     append(slices.Clone(base), "--model", "--mcp-config"),
		"model equals":   append(slices.Clone(base), "--model=x"),
		"no verbose":     slices.Delete(slices.Clone(base), 5, 6),
		"no prompt tool": slices.Delete(slices.Clone(base), 6, 8),
	}
	for name, args := range bad {
		t.Run(name, func(t *testing.T) { wantCode(t, CheckArgs(args), protocol.CodeUnsealedEngine) })
	}
	if _, err := (Seal{Session: "UPPER-not-uuid"}).Args(); err == nil {
		t.Fatal("a non-UUID session passed")
	}
}

// TestEnvironSealed: nothing of the controller's environment but the
// passed names reaches the engine; credentials come only from the env
// file; the traffic switches are always there.
func TestEnvironSealed(t *testing.T) {
	ctl := []string{"PATH=/usr/bin:/bin", "HOME=/home/u", "ANTHROPIC_API_KEY=controller-secret", "ANTHROPIC_BASE_URL=https://api.example",
		"CLAUDE_CONFIG_DIR=/home/u/.claude", "HTTPS_PROXY=http://proxy", "DISABLE_TELEMETRY=0", "NODE_OPTIONS=--require x", "TMPDIR=/tmp"}
	env, err := Environ(ctl, Dirs{Config: "/c/config", Tmp: "/c/tmp", Runtime: "/c/run"}, map[string]string{"ANTHROPIC_API_KEY": "file-key", "ANTHROPIC_BASE_URL": "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range append(slices.Clone(Forced), "PATH=/usr/bin:/bin", "HOME=/home/u", "CLAUDE_CONFIG_DIR=/c/config", "TMPDIR=/c/tmp", "CLAUDE_CODE_TMPDIR=/c/tmp", "XDG_RUNTIME_DIR=/c/run", "ANTHROPIC_API_KEY=file-key", "ANTHROPIC_BASE_URL=http://127.0.0.1:1") {
		if !slices.Contains(env, want) {
			t.Errorf("env lacks %s: %q", want, env)
		}
	}
	for _, kv := range env {
		if strings.Contains(kv, "controller-secret") || strings.Contains(kv, "proxy") || strings.HasPrefix(kv, "NODE_OPTIONS") || kv == "DISABLE_TELEMETRY=0" || kv == "CLAUDE_CONFIG_DIR=/home/u/.claude" {
			t.Errorf("controller value leaked: %s", kv)
		}
	}
	if _, err := Environ(nil, Dirs{Config: "/c", Tmp: "/t"}, map[string]string{"NODE_OPTIONS": "x"}); err == nil {
		t.Error("an env-file name outside the allow-list passed")
	}
	wantCode(t, CheckEnv([]string{"CLAUDE_CONFIG_DIR=/c", "PATH=/bin"}), protocol.CodeUnsealedEngine)
}

// TestLoadEnvFile: 0600 and the allow-list, or refused env-file.
func TestLoadEnvFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good", "# key\nANTHROPIC_API_KEY=sk-x=y\n\nANTHROPIC_BASE_URL=http://127.0.0.1:9\n", 0o600)
	m, err := LoadEnvFile(good)
	if err != nil || m["ANTHROPIC_API_KEY"] != "sk-x=y" || len(m) != 2 {
		t.Fatalf("good file: %v %v", m, err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	// A link to the file's directory: a tool that replaced it would have
	// the next launch read its own file.
	dirLink := filepath.Join(t.TempDir(), "keys")
	if err := os.Symlink(dir, dirLink); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadEnvFile(filepath.Join(dirLink, "good")); err == nil || !strings.Contains(err.Error(), dirLink+" is a symlink (the real path is "+good+")") {
		t.Errorf("a link on the way: %v; want it named, and the real path", err)
	}
	// A refusal names what a line sets only where it is a variable's name:
	// a key pasted alone on a line is not printed.
	for body, want := range map[string]string{"PATH=/evil\n": `sets "PATH"`, "sk-ant-secret7==\n": "not a variable's name"} {
		_, err := LoadEnvFile(write("named", body, 0o600))
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "secret7") {
			t.Errorf("%q: %v; want it to say %s, and no key", body, err, want)
		}
	}
	cases := map[string]string{
		"link on the way": filepath.Join(dirLink, "good"),
		"group readable":  write("g", "ANTHROPIC_API_KEY=x\n", 0o640),
		"world readable":  write("w", "ANTHROPIC_API_KEY=x\n", 0o604),
		"other name":      write("n", "PATH=/evil\n", 0o600),
		"no equals":       write("e", "ANTHROPIC_API_KEY\n", 0o600),
		"twice":           write("d", "ANTHROPIC_API_KEY=a\nANTHROPIC_API_KEY=b\n", 0o600),
		"symlink":         link,
		"directory":       dir,
		"missing":         filepath.Join(dir, "nope"),
		// What a controller made of a missing one, so that no engine
		// could write it: still refused, as the missing file was.
		"placeholder": write("p", PlaceholderEnvFile, 0o600),
		// Another name of the key: no engine's mask covers it.
		"hard link": hardLink(t, good, filepath.Join(t.TempDir(), "copy.env")),
	}
	for name, p := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := LoadEnvFile(p)
			wantCode(t, err, protocol.CodeEnvFile)
		})
	}
}

// hardLink makes link another name of file, and returns file.
func hardLink(t *testing.T, file, link string) string {
	t.Helper()
	if err := os.Link(file, link); err != nil {
		t.Fatal(err)
	}
	return file
}

// fakeClaude writes a script that answers --version like the CLI.
func fakeClaude(t *testing.T, version string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "claude")
	if err := os.WriteFile(p, []byte("#!/bin/sh\necho '"+version+" (Claude Code)'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestL7PinMismatch: a binary whose bytes changed since the pin, or whose
// version is not the pinned one, refuses engine-pin-mismatch and nothing
// is launched (Command returns no Spec).
func TestL7PinMismatch(t *testing.T) {
	ctx := context.Background()
	if _, err := Resolve(ctx, fakeClaude(t, "2.1.329"), os.Environ()); err == nil {
		t.Fatal("Resolve pinned another version")
	} else {
		wantCode(t, err, protocol.CodePinMismatch)
	}
	bin := fakeClaude(t, PinnedVersion)
	pin, err := Resolve(ctx, bin, os.Environ())
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Pin: pin, Session: testSession, ProjectRoot: t.TempDir(), Dirs: Dirs{Config: t.TempDir(), Tmp: t.TempDir()}, Environ: []string{"PATH=/usr/bin:/bin"}}
	if _, err := Command(cfg, false); err != nil {
		t.Fatalf("pinned binary refused: %v", err)
	}
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho '"+PinnedVersion+" (Claude Code)'\n# changed\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	spec, err := Command(cfg, false)
	wantCode(t, err, protocol.CodePinMismatch)
	if spec.Path != "" || spec.Args != nil {
		t.Fatalf("a spec came back with the refusal: %+v", spec)
	}
	cfg.Pin.Version = "2.1.329"
	_, err = Command(cfg, false)
	wantCode(t, err, protocol.CodePinMismatch)
}

// replay feeds the "out" frames of a probe recording to a Conn and
// returns the events and the Conn once the output ended.
func replay(t *testing.T, name string) ([]protocol.Event, *Conn) {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pr, pw := io.Pipe()
	c, err := New(pr, nopWriter{}, "", engine.Options{Execution: "x1"})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			var rec struct {
				Dir string          `json:"dir"`
				Msg json.RawMessage `json:"msg"`
			}
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Dir == "out" {
				pw.Write(append(rec.Msg, '\n'))
			}
		}
		pw.Close()
	}()
	var evs []protocol.Event
	for e := range c.Events() {
		evs = append(evs, e)
	}
	return evs, c
}

type nopWriter struct{}

func (nopWriter) Write(p []byte) (int, error) { return len(p), nil }
func (nopWriter) Close() error                { return nil }

// TestGoldenMapping: the recorded golden session maps onto Pi's event
// kinds: streamed text, a tool call with start and end, final parts, a
// run-settled per result, can_use_tool as allow-once/deny decisions, and
// nothing unknown.
func TestGoldenMapping(t *testing.T) {
	evs, c := replay(t, "rec_golden.jsonl")
	count := map[protocol.EventKind]int{}
	var text strings.Builder
	for i, e := range evs {
		if e.Seq != uint64(i+1) || e.Execution != "x1" {
			t.Fatalf("event %d numbered %d/%s", i, e.Seq, e.Execution)
		}
		count[e.Kind]++
		if e.Kind == protocol.EventTextDelta && e.Message == "m1" {
			text.WriteString(e.Text)
		}
		if e.Kind == protocol.EventUnavailable && e.Reason == protocol.ReasonUnknownNative {
			t.Errorf("unknown native frame %s", e.Native)
		}
	}
	if text.String() != "Hello from fake. You said: hello there" {
		t.Errorf("m1 text %q", text.String())
	}
	for _, k := range []protocol.EventKind{protocol.EventMessageStart, protocol.EventTextDelta, protocol.EventToolCallDelta, protocol.EventToolStart, protocol.EventToolEnd, protocol.EventMessageEnd, protocol.EventRunSettled} {
		if count[k] == 0 {
			t.Errorf("no %s event: %v", k, count)
		}
	}
	if count[protocol.EventToolStart] != count[protocol.EventToolEnd] {
		t.Errorf("tool starts %d, ends %d", count[protocol.EventToolStart], count[protocol.EventToolEnd])
	}
	ds := c.Decisions()
	if len(ds) < 2 {
		t.Fatalf("decisions %+v", ds)
	}
	for _, d := range ds {
		if !slices.Equal(d.Choices, []string{engine.ChoiceAllowOnce, engine.ChoiceDeny}) || !strings.HasSuffix(pairOf(d.ID), "/"+d.ToolUseID) || d.ToolName != "Bash" {
			t.Errorf("decision %+v", d)
		}
	}
	// The recorded tool_use message ends with its stop reason and both
	// blocks, text first.
	for _, e := range evs {
		if e.Kind == protocol.EventMessageEnd && e.StopReason == "tool_use" {
			if len(e.Content) != 2 || e.Content[0].Type != "text" || e.Content[1].Type != "toolCall" || e.Content[1].ToolName != "Bash" {
				t.Errorf("tool_use message content %+v", e.Content)
			}
			return
		}
	}
	t.Error("no message-end with stop reason tool_use")
}

// TestInterruptRecordingCancelsDecision: in the recorded interrupt with a
// permission request pending, control_cancel_request resolves the
// decision as cancelled (never denied, never left pending).
func TestInterruptRecordingCancelsDecision(t *testing.T) {
	_, c := replay(t, "rec_interrupt.jsonl")
	cancelled := 0
	for _, d := range c.Decisions() {
		if d.State == engine.DecisionCancelled {
			cancelled++
			if d.Answer != "control_cancel_request" {
				t.Errorf("cancelled decision %+v", d)
			}
		}
	}
	if cancelled == 0 {
		t.Fatalf("no cancelled decision: %+v", c.Decisions())
	}
	if err := c.Decide(context.Background(), c.Decisions()[0].ID, "always-allow"); err == nil {
		t.Error("a widening choice was accepted")
	}
}

// TestPromptBusyWhileRunning: a prompt while a turn runs refuses busy
// and writes nothing (the controller's queue is the only queue).
func TestPromptBusyWhileRunning(t *testing.T) {
	pr, pw := io.Pipe()
	var w recWriter
	c, err := New(pr, &w, testSession, engine.Options{Execution: "x1", CommandTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for range c.Events() {
		}
	}()
	pw.Write([]byte(`{"type":"system","subtype":"init","session_id":"` + testSession + `"}` + "\n"))
	for !c.Turn().Running {
		time.Sleep(time.Millisecond)
	}
	_, err = c.Prompt(context.Background(), "second")
	wantCode(t, err, protocol.CodeBusy)
	if w.n != 0 {
		t.Fatalf("%d bytes written", w.n)
	}
	pw.Close()
}

type recWriter struct{ n int }

func (w *recWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }
func (w *recWriter) Close() error                { return nil }

// TestAPIErrorMessageFails: a prompt the CLI cannot send to the model (no
// key: recorded with 2.1.328, no env, no network) is answered by a
// synthetic assistant frame with no stream, whose stop_reason says
// stop_sequence but whose error and is_api_error_message say the turn
// failed: its message ends with stop reason error, as Pi's failed turns
// do, so `mosaicctl prompt` exits 4 instead of 0 with the error as the
// answer. A synthetic frame without them keeps its own stop reason.
func TestAPIErrorMessageFails(t *testing.T) {
	const failed = `{"type":"assistant","message":{"id":"1e610df1-91a3-4ced-93cb-f2f210e8d122","model":"<synthetic>","role":"assistant","stop_reason":"stop_sequence","stop_sequence":"","type":"message","content":[{"type":"text","text":"Not logged in · Please run /login"}]},"parent_tool_use_id":null,"session_id":"","uuid":"a1","error":"authentication_failed","is_api_error_message":true}`
	const plain = `{"type":"assistant","message":{"id":"m2","model":"<synthetic>","role":"assistant","stop_reason":"stop_sequence","type":"message","content":[{"type":"text","text":"fine"}]},"parent_tool_use_id":null,"session_id":"","uuid":"a2"}`
	for _, tc := range []struct {
		name, frame, text, want string
	}{
		{"an API error", failed, "Not logged in · Please run /login", "error"},
		{"no error", plain, "fine", "stop_sequence"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(strings.NewReader(tc.frame+"\n"), nopWriter{}, "", engine.Options{Execution: "x1"})
			if err != nil {
				t.Fatal(err)
			}
			var ends []protocol.Event
			for e := range c.Events() {
				if e.Kind == protocol.EventMessageEnd {
					ends = append(ends, e)
				}
			}
			if len(ends) != 1 || ends[0].StopReason != tc.want || len(ends[0].Content) != 1 || ends[0].Content[0].Text != tc.text {
				t.Fatalf("message ends %+v; want one saying %q with stop reason %s", ends, tc.text, tc.want)
			}
		})
	}
}
