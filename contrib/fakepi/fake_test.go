package fakepi_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/mosaic-agents/mosaic/contrib/fakepi"
	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
)

func fakeEngine() engine { return engine{name: "fake", bin: fakeBin} }

func withControl(t *testing.T, o options) (*proc, *fakepi.Control) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "ctl.sock")
	o.env = append(o.env, fakepi.EnvControl+"="+sock)
	p := start(t, fakeEngine(), o)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := fakepi.DialControl(ctx, sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return p, c
}

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return ctx
}

// TestPauseBeforeAgentSettled holds the run between agent_end and
// agent_settled, the R3-1 window, and shows that an item queued there is
// returned by clear_queue exactly once.
func TestPauseBeforeAgentSettled(t *testing.T) {
	p, c := withControl(t, options{model: true, script: stubmodel.Script{Turns: []stubmodel.Turn{{Text: []string{"one"}}}}})
	ctx := ctxT(t)
	if err := c.Arm(ctx, fakepi.PointBeforeAgentSettled); err != nil {
		t.Fatal(err)
	}
	p.call(map[string]any{"type": "prompt", "id": "p1", "message": "first"})
	if _, err := c.Wait(ctx, fakepi.PointBeforeAgentSettled); err != nil {
		t.Fatal(err)
	}
	p.until("agent_end", isKind("agent_end"))
	// isStreaming is already false here, as in Pi: a prompt is accepted.
	st := last(p.call(map[string]any{"type": "get_state", "id": "st"})).obj("data")
	if st["isStreaming"] != false {
		t.Fatalf("isStreaming before agent_settled: %v", st["isStreaming"])
	}
	q := p.call(map[string]any{"type": "follow_up", "id": "f", "message": "queued by someone"})
	equalKinds(t, "follow_up", q, []string{"queue_update", "response:follow_up:true"})
	cq := last(p.call(map[string]any{"type": "clear_queue", "id": "cq"})).obj("data")
	if f, _ := cq["followUp"].([]any); len(f) != 1 || f[0] != "queued by someone" {
		t.Errorf("clear_queue: %v", cq)
	}
	if err := c.Release(ctx, fakepi.PointBeforeAgentSettled); err != nil {
		t.Fatal(err)
	}
	p.until("agent_settled", isKind("agent_settled"))
}

// TestPauseToolRunning: tool-running reports the child's pid while the
// tool runs; an abort there kills it and reports "Command aborted".
func TestPauseToolRunning(t *testing.T) {
	p, c := withControl(t, options{model: true, script: stubmodel.Script{Turns: []stubmodel.Turn{{Tool: &stubmodel.ToolCall{Command: "sleep 30"}}}}})
	ctx := ctxT(t)
	if err := c.Arm(ctx, fakepi.PointToolRunning); err != nil {
		t.Fatal(err)
	}
	p.call(map[string]any{"type": "prompt", "id": "p1", "message": "go"})
	pa, err := c.Wait(ctx, fakepi.PointToolRunning)
	if err != nil {
		t.Fatal(err)
	}
	if pid, _ := pa.Detail["pid"].(float64); pid <= 0 {
		t.Fatalf("detail: %v", pa.Detail)
	}
	p.send(map[string]any{"type": "abort", "id": "a"})
	if err := c.Release(ctx, fakepi.PointToolRunning); err != nil {
		t.Fatal(err)
	}
	got := p.until("abort", isResponse("a"))
	checkAbortedTool(t, got)
}

// TestRetry: a retryable error gives agent_end willRetry:true, then a
// second run, and one agent_settled.
func TestRetry(t *testing.T) {
	p := start(t, fakeEngine(), options{model: true, script: stubmodel.Script{Turns: []stubmodel.Turn{
		{Error: "503 overloaded", Retryable: true}, {Text: []string{"ok"}},
	}}})
	p.call(map[string]any{"type": "prompt", "id": "p1", "message": "x"})
	got := p.until("settled", isKind("agent_settled"))
	equalKinds(t, "retry", got, concat(
		[]string{"agent_start", "turn_start", "message_start:user", "message_end:user",
			"message_start:assistant", "message_end:assistant:error", "turn_end", "agent_end", "auto_retry_start",
			"agent_start", "turn_start"},
		answerKinds(stubmodel.Turn{Text: []string{"ok"}}),
		[]string{"auto_retry_end", "turn_end", "agent_end", "agent_settled"}))
	ends := 0
	for _, r := range got {
		if r.kind() == "agent_end" {
			if want := ends == 0; r["willRetry"] != want {
				t.Errorf("agent_end %d willRetry %v", ends, r["willRetry"])
			}
			ends++
		}
	}
}

// TestDialogAndExtensionFollowUp: a scripted dialog waits for its
// response; a scripted extension follow-up lands in the native queue.
func TestDialogAndExtensionFollowUp(t *testing.T) {
	p := start(t, fakeEngine(), options{model: true, script: stubmodel.Script{Turns: []stubmodel.Turn{
		{Dialog: &stubmodel.Dialog{Method: "confirm", Title: "Allow?", Message: "really"}, Text: []string{"yes"}, FollowUp: "ext follow"},
	}}})
	p.call(map[string]any{"type": "prompt", "id": "p1", "message": "x"})
	req := last(p.until("dialog", isKind("extension_ui_request")))
	if req.str("method") != "confirm" || req.str("title") != "Allow?" || req.str("message") != "really" {
		t.Fatalf("dialog: %v", req)
	}
	p.send(map[string]any{"type": "extension_ui_response", "id": req.str("id"), "confirmed": true})
	got := p.until("settled", isKind("agent_settled"))
	var qs []rec
	for _, r := range got {
		if r.kind() == "queue_update" {
			qs = append(qs, r)
		}
	}
	if len(qs) != 2 || len(qs[0]["followUp"].([]any)) != 1 || len(qs[1]["followUp"].([]any)) != 0 {
		t.Errorf("extension follow-up queue updates: %v", qs)
	}
}

// TestEvidenceLogs: the stdin log holds the exact bytes; the session log
// holds exactly what the fake wrote to the session file.
func TestEvidenceLogs(t *testing.T) {
	dir := t.TempDir()
	in, sl := filepath.Join(dir, "stdin.log"), filepath.Join(dir, "session.log")
	p := start(t, fakeEngine(), options{model: true, env: []string{fakepi.EnvStdinLog + "=" + in, fakepi.EnvSessionLog + "=" + sl}})
	raw := "{\"type\":\"prompt\",\"id\":\"p\",\"message\":\"a\u2028b\"}\r\n"
	if _, err := p.stdin.Write([]byte(raw)); err != nil {
		t.Fatal(err)
	}
	got := p.until("settled", isKind("agent_settled"))
	if u := got[3]; u.kind() != "message_start:user" {
		t.Fatalf("got %v", kinds(got))
	} else if c := u.obj("message")["content"].([]any); rec(c[0].(map[string]any)).str("text") != "a\u2028b" {
		t.Errorf("U+2028 split or altered the prompt: %v", c)
	}
	_ = p.stdin.Close()
	if err := p.wait(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(in); string(b) != raw {
		t.Errorf("stdin log %q", b)
	}
	sess, _ := os.ReadFile(p.session)
	logged, _ := os.ReadFile(sl)
	if len(sess) == 0 || !bytes.Equal(sess, logged) {
		t.Errorf("session log differs from the session file:\n%s\n---\n%s", logged, sess)
	}
}

// TestUnsealedArgvRefused: the fake refuses any argv outside the seal.
func TestUnsealedArgvRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		argv []string
	}{
		{"extra flag", []string{"--mode", "rpc", "--no-extensions", "--no-prompt-templates", "--no-themes", "--no-skills", "--no-context-files", "--session", "/tmp/x", "--extension", "e"}},
		{"missing seal", []string{"--mode", "rpc", "--no-extensions", "--session", "/tmp/x"}},
		{"relative session", []string{"--mode", "rpc", "--no-extensions", "--no-prompt-templates", "--no-themes", "--no-skills", "--no-context-files", "--session", "x"}},
		{"twice", []string{"--mode", "rpc", "--no-extensions", "--no-prompt-templates", "--no-themes", "--no-skills", "--no-context-files", "--session", "/tmp/x", "--model", "a", "--model", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := fakepi.ParseArgs(tc.argv); err == nil {
				t.Errorf("accepted %v", tc.argv)
			}
		})
	}
}
