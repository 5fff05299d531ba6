package claude

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	hclaude "github.com/mosaic-agents/mosaic/history/claude"
)

// TestRecordClaudeCompaction records what the pinned CLI does on an
// auto-compaction (the fake reporting a context near full; a /compact
// prompt never reaches the CLI, Prompt's text policy refuses it): its stdout, its transcript and every request the fake saw,
// into $MOSAIC_CLAUDE_RECORD (testdata/compact_* were made so). Skipped
// without it: a recording, not a test.
func TestRecordClaudeCompaction(t *testing.T) {
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
	step := func(text string) {
		from := prompt(t, l, text)
		settledAfter(t, l, from)
		time.Sleep(500 * time.Millisecond)
	}
	step("hello there")
	step("FULLCONTEXT please")
	step("after the auto compaction")
	l.Close()
	<-l.Done()
	l2 := r.launch(t, true)
	from := prompt(t, l2, "after the resume")
	settledAfter(t, l2, from)
	time.Sleep(500 * time.Millisecond)
	l2.Close()
	<-l2.Done()

	save := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	save("stdout.jsonl", out.Bytes())
	tr, err := os.ReadFile(filepath.Join(r.cfg.Dirs.Config, "projects", hclaude.Slug(r.cfg.ProjectRoot), r.cfg.Session+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	save("transcript.jsonl", tr)
	// Of each request, its messages: the system prompt and the tools
	// (55 KB each time) are the CLI's own.
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

// syncWriter serialises writes to w.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}
