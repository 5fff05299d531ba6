package claude

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/engine"
	hclaude "github.com/mosaic-agents/mosaic/history/claude"
)

// TestRecordClaudeBackgroundTask records what the pinned CLI does when a
// run_in_background Bash tool (allowed once) ends while the engine is
// idle, and on the next prompt: its stdout, its transcript and the
// messages of every request, into $MOSAIC_CLAUDE_RECORD (testdata/
// background/ was made so). Skipped without it: a recording, not a test.
func TestRecordClaudeBackgroundTask(t *testing.T) {
	dir := os.Getenv("MOSAIC_CLAUDE_RECORD")
	if dir == "" {
		t.Skip("MOSAIC_CLAUDE_RECORD is unset")
	}
	r := newClaudeRig(t)
	var out bytes.Buffer
	r.tap = &syncWriter{w: &out}
	r.fake.KeepBodies()
	l := r.launch(t, false)
	if _, err := l.Initialize(ctxT(t, time.Minute)); err != nil {
		t.Fatal(err)
	}
	from := prompt(t, l, "please BASHBG{sleep 3; touch bgdone.txt}")
	d := l.waitDecision(t, 0)
	if err := l.Decide(ctxT(t, time.Minute), d.ID, engine.ChoiceAllowOnce); err != nil {
		t.Fatal(err)
	}
	settledAfter(t, l, from)
	// The task ends while the engine is idle; whatever the CLI does then.
	time.Sleep(8 * time.Second)
	from = prompt(t, l, "after the background task")
	settledAfter(t, l, from)
	time.Sleep(2 * time.Second)
	l.Close()
	<-l.Done()

	saveRecording(t, dir, r, out.Bytes())
}

// saveRecording writes the CLI's stdout, its transcript and the messages
// of every request the fake kept into dir.
func saveRecording(t *testing.T, dir string, r *claudeRig, stdout []byte) {
	t.Helper()
	save := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	save("stdout.jsonl", stdout)
	tr, err := os.ReadFile(filepath.Join(r.cfg.Dirs.Config, "projects", hclaude.Slug(r.cfg.ProjectRoot), r.cfg.Session+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	save("transcript.jsonl", tr)
	var reqs bytes.Buffer
	for i, b := range r.fake.Bodies() {
		var body struct {
			Messages json.RawMessage `json:"messages"`
		}
		if err := json.Unmarshal(b, &body); err != nil {
			t.Fatal(err)
		}
		line, _ := json.Marshal(map[string]any{"n": i + 1, "messages": body.Messages})
		reqs.Write(append(line, '\n'))
	}
	save("requests.jsonl", reqs.Bytes())
}

// TestRecordClaudeBackgroundTaskMidTurn is TestRecordClaudeBackgroundTask
// with the task ending while the CLI streams the next prompt's reply
// (testdata/background_midturn/ was made so).
func TestRecordClaudeBackgroundTaskMidTurn(t *testing.T) {
	dir := os.Getenv("MOSAIC_CLAUDE_RECORD")
	if dir == "" {
		t.Skip("MOSAIC_CLAUDE_RECORD is unset")
	}
	r := newClaudeRig(t)
	var out bytes.Buffer
	r.tap = &syncWriter{w: &out}
	r.fake.KeepBodies()
	l := r.launch(t, false)
	if _, err := l.Initialize(ctxT(t, time.Minute)); err != nil {
		t.Fatal(err)
	}
	from := prompt(t, l, "please BASHBG{sleep 2; touch bgdone.txt}")
	d := l.waitDecision(t, 0)
	if err := l.Decide(ctxT(t, time.Minute), d.ID, engine.ChoiceAllowOnce); err != nil {
		t.Fatal(err)
	}
	settledAfter(t, l, from)
	from = prompt(t, l, "please SLOW")
	settledAfter(t, l, from)
	time.Sleep(3 * time.Second)
	from = prompt(t, l, "after the background task")
	settledAfter(t, l, from)
	time.Sleep(2 * time.Second)
	l.Close()
	<-l.Done()
	saveRecording(t, dir, r, out.Bytes())
}
