package fakepi_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
	"golang.org/x/sys/unix"
)

const busyText = "Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') to queue the message."

// answerKinds is the message events of one streamed answer to a turn.
func answerKinds(turn stubmodel.Turn) []string {
	k := []string{"message_start:assistant", "message_update:text_start"}
	for range turn.Text {
		k = append(k, "message_update:text_delta")
	}
	stop := "stop"
	if turn.Tool != nil {
		k = append(k, "message_update:toolcall_start", "message_update:toolcall_delta")
		for range 4 {
			k = append(k, "message_update:toolcall_delta")
		}
	}
	k = append(k, "message_update:text_end")
	if turn.Tool != nil {
		k = append(k, "message_update:toolcall_end")
		stop = "toolUse"
	}
	return append(k, "message_end:assistant:"+stop)
}

func defaultTurn(text string) stubmodel.Turn {
	return stubmodel.Turn{Text: stubmodel.DefaultAnswer(text)}
}

func concat(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// TestSmoke: with no credentials and no model, the sealed engine answers
// the control commands, refuses a prompt, and writes no session file.
func TestSmoke(t *testing.T) {
	forEach(t, func(t *testing.T, e engine) {
		p := start(t, e, options{})
		st := p.call(map[string]any{"type": "get_state", "id": "st"})
		equalKinds(t, "get_state", st, []string{"response:get_state:true"})
		data := last(st).obj("data")
		if data.obj("model").str("id") != "unknown" || data["isStreaming"] != false || data.str("thinkingLevel") != "off" ||
			data.str("steeringMode") != "one-at-a-time" || data.str("sessionFile") != p.session {
			t.Errorf("get_state data: %v", data)
		}
		cmds := p.call(map[string]any{"type": "get_commands", "id": "gc"})
		list, _ := last(cmds).obj("data")["commands"].([]any)
		if len(list) != 1 || rec(list[0].(map[string]any)).str("name") != "llama" {
			t.Errorf("get_commands: %v", list)
		}
		cq := p.call(map[string]any{"type": "clear_queue", "id": "cq"})
		equalKinds(t, "clear_queue", cq, []string{"queue_update", "response:clear_queue:true"})
		ab := p.call(map[string]any{"type": "abort", "id": "ab"})
		equalKinds(t, "abort", ab, []string{"response:abort:true"})
		tr := p.call(map[string]any{"type": "get_tree", "id": "gt"})
		tree, _ := last(tr).obj("data")["tree"].([]any)
		if len(tree) != 1 {
			t.Fatalf("get_tree: %v", last(tr))
		}
		root := rec(tree[0].(map[string]any)).obj("entry")
		if root.str("type") != "thinking_level_change" || root["parentId"] != nil || last(tr).obj("data").str("leafId") != root.str("id") {
			t.Errorf("startup append without model: %v", last(tr))
		}
		pr := p.call(map[string]any{"type": "prompt", "id": "p", "message": "hi"})
		if r := last(pr); r["success"] != false || !strings.HasPrefix(r.str("error"), "No API key found for the selected model.") {
			t.Errorf("prompt without model: %v", r)
		}
		un := p.call(map[string]any{"type": "frobnicate", "id": "u"})
		if r := last(un); r.str("error") != "Unknown command: frobnicate" || r.str("command") != "frobnicate" {
			t.Errorf("unknown command: %v", r)
		}
		p.send(map[string]any{"type": "get_state", "id": "pre"})
		if _, err := p.stdin.Write([]byte("{not json\n")); err != nil {
			t.Fatal(err)
		}
		pe := p.until("parse error", isKind("response:parse:false"))
		if r := last(pe); r.str("error") != "Failed to parse command: Expected property name or '}' in JSON at position 1 (line 1 column 2)" || r["id"] != nil {
			t.Errorf("parse error: %v", r)
		}
		if _, err := os.Stat(p.session); !os.IsNotExist(err) {
			t.Errorf("session file exists without an assistant message: %v", err)
		}
		_ = p.stdin.Close()
		if err := p.wait(); err != nil {
			t.Errorf("exit at stdin EOF: %v", err)
		}
	})
}

// TestToolCallWithSetsid: a prompt streams text, runs a real bash tool
// whose child leaves the process group with setsid, and answers again.
func TestToolCallWithSetsid(t *testing.T) {
	forEach(t, func(t *testing.T, e engine) {
		dir := t.TempDir()
		pidFile := filepath.Join(dir, "child.pid")
		cmdline := "setsid sleep 300 & echo $! > " + pidFile + "; echo started"
		script := stubmodel.Script{Turns: []stubmodel.Turn{
			{Text: []string{"Hello! ", "I will ", "start a job."}, Tool: &stubmodel.ToolCall{Command: cmdline}},
			{Text: []string{"Background ", "job ", "is running."}},
		}}
		p := start(t, e, options{model: true, script: script})
		t.Cleanup(func() {
			if b, err := os.ReadFile(pidFile); err == nil {
				if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		})
		got := p.call(map[string]any{"type": "prompt", "id": "p1", "message": "hi"})
		equalKinds(t, "prompt response comes first", got, []string{"response:prompt:true"})
		got = p.until("agent_settled", isKind("agent_settled"))
		want := concat(
			[]string{"agent_start", "turn_start", "message_start:user", "message_end:user"},
			answerKinds(script.Turns[0]),
			[]string{"tool_execution_start", "tool_execution_update", "tool_execution_update", "tool_execution_end",
				"message_start:toolResult", "message_end:toolResult", "turn_end", "turn_start"},
			answerKinds(script.Turns[1]),
			[]string{"turn_end", "agent_end", "agent_settled"},
		)
		equalKinds(t, "tool call run", got, want)
		for _, r := range got {
			switch r.kind() {
			case "tool_execution_end":
				c, _ := r.obj("result")["content"].([]any)
				if len(c) != 1 || rec(c[0].(map[string]any)).str("text") != "started\n" || r["isError"] != false {
					t.Errorf("tool result: %v", r)
				}
			case "agent_end":
				if r["willRetry"] != false {
					t.Errorf("agent_end: %v", r)
				}
			}
		}
		b, err := os.ReadFile(pidFile)
		if err != nil {
			t.Fatalf("the tool's child did not run: %v", err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(pid, 0); err != nil {
			t.Errorf("setsid child %d is not running: %v", pid, err)
		}
		sid, err := unix.Getsid(pid)
		if err != nil || sid != pid {
			t.Errorf("child %d is not a session leader (sid %d, %v)", pid, sid, err)
		}
		if e.real {
			if n := len(p.stub.Requests()); n != 2 {
				t.Errorf("model calls: %d, want 2", n)
			}
		}
	})
}

// startEndless starts a prompt whose answer streams until aborted and
// waits for its first text delta.
func startEndless(t *testing.T, e engine) *proc {
	t.Helper()
	p := start(t, e, options{model: true, script: stubmodel.Script{Turns: []stubmodel.Turn{{Endless: true, ChunkDelayMS: 50}}}})
	p.call(map[string]any{"type": "prompt", "id": "p1", "message": "SLOWTEXT please"})
	p.until("first delta", isKind("message_update:text_delta"))
	return p
}

// TestPromptWhileStreaming: a prompt without streamingBehavior is refused
// with Pi's text; with it, it is queued (queue_update before the response);
// clear_queue returns both; abort ends the stream.
func TestPromptWhileStreaming(t *testing.T) {
	forEach(t, func(t *testing.T, e engine) {
		p := startEndless(t, e)
		notDelta := func(rs []rec) []rec {
			var out []rec
			for _, r := range rs {
				if r.kind() != "message_update:text_delta" {
					out = append(out, r)
				}
			}
			return out
		}
		st := notDelta(p.call(map[string]any{"type": "get_state", "id": "st1"}))
		if d := last(st).obj("data"); d["isStreaming"] != true || d["messageCount"] != float64(1) {
			t.Errorf("get_state while streaming: %v", d)
		}
		r := last(p.call(map[string]any{"type": "prompt", "id": "p2", "message": "PLAIN interrupt"}))
		if r["success"] != false || r.str("error") != busyText {
			t.Errorf("busy refusal: %v", r)
		}
		got := notDelta(p.call(map[string]any{"type": "prompt", "id": "p3", "message": "PLAIN queued followup", "streamingBehavior": "followUp"}))
		equalKinds(t, "followUp queued", got, []string{"queue_update", "response:prompt:true"})
		got = notDelta(p.call(map[string]any{"type": "prompt", "id": "p4", "message": "PLAIN queued steer", "streamingBehavior": "steer"}))
		equalKinds(t, "steer queued", got, []string{"queue_update", "response:prompt:true"})
		if q := got[0]; len(q["steering"].([]any)) != 1 || len(q["followUp"].([]any)) != 1 {
			t.Errorf("queue_update: %v", q)
		}
		got = notDelta(p.call(map[string]any{"type": "clear_queue", "id": "cq"}))
		equalKinds(t, "clear_queue", got, []string{"queue_update", "response:clear_queue:true"})
		d := last(got).obj("data")
		if s, f := d["steering"].([]any), d["followUp"].([]any); len(s) != 1 || s[0] != "PLAIN queued steer" || len(f) != 1 || f[0] != "PLAIN queued followup" {
			t.Errorf("clear_queue data: %v", d)
		}
		got = notDelta(p.call(map[string]any{"type": "abort", "id": "a1"}))
		equalKinds(t, "abort during stream", got, []string{"message_update:text_end", "message_end:assistant:aborted", "turn_end", "agent_end", "agent_settled", "response:abort:true"})
		for _, r := range got {
			if r.kind() == "message_end:assistant:aborted" && r.obj("message").str("errorMessage") != "Request was aborted" {
				t.Errorf("aborted message: %v", r)
			}
		}
	})
}

// queuedDuringTool starts a long tool call and queues a steer and a
// follow-up while it runs.
func queuedDuringTool(t *testing.T, e engine) *proc {
	t.Helper()
	script := stubmodel.Script{Turns: []stubmodel.Turn{{Text: []string{"Running ", "a long ", "tool."}, Tool: &stubmodel.ToolCall{Command: "sleep 20; echo slept"}}}}
	p := start(t, e, options{model: true, script: script})
	p.call(map[string]any{"type": "prompt", "id": "p1", "message": "LONGTOOL now"})
	p.until("tool running", isKind("tool_execution_update"))
	equalKinds(t, "steer", p.call(map[string]any{"type": "steer", "id": "s1", "message": "PLAIN steer-1"}), []string{"queue_update", "response:steer:true"})
	equalKinds(t, "follow_up", p.call(map[string]any{"type": "follow_up", "id": "f1", "message": "PLAIN follow-1"}), []string{"queue_update", "response:follow_up:true"})
	return p
}

// TestClearQueueThenAbort: clear_queue empties both queues, so abort
// ends the run without running them.
func TestClearQueueThenAbort(t *testing.T) {
	forEach(t, func(t *testing.T, e engine) {
		p := queuedDuringTool(t, e)
		got := p.call(map[string]any{"type": "clear_queue", "id": "cq"})
		equalKinds(t, "clear_queue", got, []string{"queue_update", "response:clear_queue:true"})
		got = p.call(map[string]any{"type": "abort", "id": "a1"})
		equalKinds(t, "abort after clear_queue", got, []string{
			"tool_execution_end", "message_start:toolResult", "message_end:toolResult", "turn_end",
			"turn_start", "message_start:assistant", "message_end:assistant:error", "turn_end", "agent_end", "agent_settled",
			"response:abort:true"})
		checkAbortedTool(t, got)
		st := last(p.call(map[string]any{"type": "get_state", "id": "st2"})).obj("data")
		if st["isStreaming"] != false || st["messageCount"] != float64(4) || st["pendingMessageCount"] != float64(0) {
			t.Errorf("get_state after abort: %v", st)
		}
	})
}

func checkAbortedTool(t *testing.T, got []rec) {
	t.Helper()
	for _, r := range got {
		switch r.kind() {
		case "tool_execution_end":
			c, _ := r.obj("result")["content"].([]any)
			if r["isError"] != true || len(c) != 1 || rec(c[0].(map[string]any)).str("text") != "Command aborted" {
				t.Errorf("aborted tool: %v", r)
			}
		case "message_end:assistant:error":
			if r.obj("message").str("errorMessage") != "This operation was aborted" {
				t.Errorf("abort error message: %v", r)
			}
		}
	}
}

// TestAbortWithoutClearQueue: abort goes on to run what is still queued
// (Pi's rpc.md: send clear_queue before abort), the steer in the aborted
// run and the follow-up in a new one, under one agent_settled.
func TestAbortWithoutClearQueue(t *testing.T) {
	forEach(t, func(t *testing.T, e engine) {
		p := queuedDuringTool(t, e)
		got := p.call(map[string]any{"type": "abort", "id": "a1"})
		equalKinds(t, "abort without clear_queue", got, concat(
			[]string{"tool_execution_end", "message_start:toolResult", "message_end:toolResult", "turn_end",
				"turn_start", "queue_update", "message_start:user", "message_end:user",
				"message_start:assistant", "message_end:assistant:error", "turn_end", "agent_end",
				"agent_start", "turn_start", "queue_update", "message_start:user", "message_end:user"},
			answerKinds(defaultTurn("PLAIN follow-1")),
			[]string{"turn_end", "agent_end", "agent_settled", "response:abort:true"}))
		checkAbortedTool(t, got)
		var text string
		for _, r := range got {
			if r.kind() == "message_end:assistant:stop" {
				c, _ := r.obj("message")["content"].([]any)
				text = rec(c[0].(map[string]any)).str("text")
			}
		}
		if text != "Plain answer to: PLAIN follow-1" {
			t.Errorf("follow-up answer %q", text)
		}
	})
}

// TestStdinEOF: Pi exits 0 at stdin EOF, idle or mid-run.
func TestStdinEOF(t *testing.T) {
	forEach(t, func(t *testing.T, e engine) {
		t.Run("idle", func(t *testing.T) {
			p := start(t, e, options{})
			_ = p.stdin.Close()
			if err := p.wait(); err != nil {
				t.Errorf("exit: %v", err)
			}
		})
		t.Run("streaming", func(t *testing.T) {
			p := startEndless(t, e)
			_ = p.stdin.Close()
			if err := p.wait(); err != nil {
				t.Errorf("exit: %v", err)
			}
		})
	})
}

type entry struct {
	Type     string  `json:"type"`
	ID       string  `json:"id"`
	ParentID *string `json:"parentId"`
	Message  *struct {
		Role       string `json:"role"`
		StopReason string `json:"stopReason"`
	} `json:"message"`
}

func readSession(t *testing.T, path string) []entry {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("session file: %v", err)
	}
	var out []entry
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		var e entry
		if err := jsonUnmarshal([]byte(l), &e); err != nil {
			t.Fatalf("session line %q: %v", l, err)
		}
		out = append(out, e)
	}
	return out
}

// TestLazySessionAndStartupAppend: a new session gains model_change and
// thinking_level_change in memory; nothing reaches disk until an assistant
// message exists, then everything at once; a restart appends nothing.
func TestLazySessionAndStartupAppend(t *testing.T) {
	forEach(t, func(t *testing.T, e engine) {
		home := t.TempDir()
		p := start(t, e, options{model: true, home: home, script: stubmodel.Script{Turns: []stubmodel.Turn{{Endless: true, ChunkDelayMS: 50}}}})
		ge := last(p.call(map[string]any{"type": "get_entries", "id": "ge0"})).obj("data")
		ents, _ := ge["entries"].([]any)
		if len(ents) != 2 || rec(ents[0].(map[string]any)).str("type") != "model_change" || rec(ents[1].(map[string]any)).str("type") != "thinking_level_change" {
			t.Fatalf("startup entries: %v", ge)
		}
		p.call(map[string]any{"type": "prompt", "id": "p1", "message": "hello"})
		p.until("streaming", isKind("message_update:text_delta"))
		if _, err := os.Stat(p.session); !os.IsNotExist(err) {
			t.Fatalf("session file written before any assistant message: %v", err)
		}
		p.call(map[string]any{"type": "abort", "id": "a1"})
		got := readSession(t, p.session)
		types := []string{}
		for _, en := range got {
			k := en.Type
			if en.Message != nil {
				k += ":" + en.Message.Role
			}
			types = append(types, k)
		}
		want := []string{"session", "model_change", "thinking_level_change", "message:user", "message:assistant"}
		if strings.Join(types, ",") != strings.Join(want, ",") {
			t.Fatalf("session file: %v, want %v", types, want)
		}
		if got[1].ParentID != nil || *got[2].ParentID != got[1].ID || *got[3].ParentID != got[2].ID || got[4].Message.StopReason != "aborted" {
			t.Errorf("session chain: %+v", got)
		}
		_ = p.stdin.Close()
		if err := p.wait(); err != nil {
			t.Fatalf("exit: %v", err)
		}

		// Restart on the same file: messages and a thinking entry exist,
		// so nothing is appended and the leaf is the last line.
		p2 := start(t, e, options{model: true, home: home, session: p.session})
		ge = last(p2.call(map[string]any{"type": "get_entries", "id": "ge1"})).obj("data")
		ents, _ = ge["entries"].([]any)
		if len(ents) != 4 || ge.str("leafId") != got[4].ID {
			t.Errorf("after restart: %d entries, leaf %v, want 4 and %s", len(ents), ge["leafId"], got[4].ID)
		}
		st := last(p2.call(map[string]any{"type": "get_state", "id": "st"})).obj("data")
		if st["messageCount"] != float64(2) {
			t.Errorf("messageCount after restart: %v", st["messageCount"])
		}
		if after := readSession(t, p.session); len(after) != len(got) {
			t.Errorf("restart appended %d lines", len(after)-len(got))
		}
	})
}
