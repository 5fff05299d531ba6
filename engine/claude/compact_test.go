package claude

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/engine"
	hclaude "github.com/mosaic-agents/mosaic/history/claude"
)

// CompactSession is the session of testdata/compact (TestRecordClaudeCompaction).
const compactSession = "f9c56b21-9809-41ae-ba8d-59f950e52fd0"

// TestCompactAnnounced: on an auto-compaction the real CLI announces its
// compact_boundary and its summary on stdout, under the uuids of their
// transcript lines, and each line says what its frame said (the boundary
// its logical parent and preserved segment, the summary its text, which
// the frame carries as a text block and the line as a string); like
// every assistant line before and after it, and the resumed process's.
func TestCompactAnnounced(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "compact", "stdout.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	c := replayLines(t, engine.Options{Execution: "x1"}, strings.Split(strings.TrimSpace(string(raw)), "\n")...)
	tr := readCompact(t)
	var checked []string
	for _, id := range tr.Order() {
		e, _ := tr.Entry(id)
		got, ok := c.Announced(id)
		switch {
		case e.Type == "assistant" || e.Type == "system" || e.Type == "user" && !e.Prompt:
			checked = append(checked, e.Type)
			if !ok || got != e.Said {
				t.Errorf("line %d (%s %s): announced %v, says what was announced %v", e.Line, e.Type, id, ok, got == e.Said)
			}
		case ok:
			t.Errorf("line %d (%s %s) announced", e.Line, e.Type, id)
		}
	}
	if want := "assistant assistant system user assistant assistant"; strings.Join(checked, " ") != want {
		t.Fatalf("checked %v; the recording holds %s", checked, want)
	}
}

// readCompact reads testdata/compact's transcript.
func readCompact(t *testing.T) *hclaude.Transcript {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "compact", "transcript.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	ref := hclaude.Ref{ConfigDir: t.TempDir(), Project: "/tmp/TestRecordClaudeCompaction2491440027/001/work", Session: compactSession}
	path, err := ref.Path()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	tr, err := hclaude.Read(ref)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}
