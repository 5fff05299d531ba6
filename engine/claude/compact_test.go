package claude

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/engine"
	hclaude "github.com/mosaic-agents/mosaic/history/claude"
)

// The sessions and projects of testdata/compact
// (TestRecordClaudeCompaction) and testdata/background
// (TestRecordClaudeBackgroundTask).
const (
	compactSession    = "f9c56b21-9809-41ae-ba8d-59f950e52fd0"
	compactProject    = "/tmp/TestRecordClaudeCompaction2491440027/001/work"
	backgroundSession = "4d56b431-130a-48c5-8b4b-36b685a71f33"
	backgroundProject = "/tmp/TestRecordClaudeBackgroundTask3645367445/001/work"
)

// TestCompactAnnounced: on an auto-compaction the real CLI announces its
// compact_boundary and its summary on stdout, under the uuids of their
// transcript lines, and each line says what its frame said (the boundary
// its logical parent and preserved segment, the summary its text, which
// the frame carries as a text block and the line as a string); like
// every assistant line before and after it, and the resumed process's.
func TestCompactAnnounced(t *testing.T) {
	c := replayRecording(t, "compact")
	tr := readRecording(t, "compact", compactProject, compactSession)
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

// TestBackgroundAnnounced: when a run_in_background task ends while the
// real CLI is idle, it announces a system task_notification frame under a
// uuid of its own and then writes a user line (promptSource "system")
// under another, whose words are the notification the frame announced
// (Notified counts it once); the reply the CLI then gives is announced
// under its line's uuid, as every other assistant and tool result line.
func TestBackgroundAnnounced(t *testing.T) {
	c := replayRecording(t, "background")
	tr := readRecording(t, "background", backgroundProject, backgroundSession)
	var checked []string
	for _, id := range tr.Order() {
		e, _ := tr.Entry(id)
		got, ok := c.Announced(id)
		switch {
		case e.Notification:
			checked = append(checked, "notification")
			if ok || c.Notified(e.Said) != 1 {
				t.Errorf("line %d (%s): announced under its uuid %v, notified %d times; want once", e.Line, id, ok, c.Notified(e.Said))
			}
		case e.Type == "assistant" || e.Type == "system" || e.Type == "user" && !e.Prompt:
			checked = append(checked, e.Type)
			if !ok || got != e.Said {
				t.Errorf("line %d (%s %s): announced %v, says what was announced %v", e.Line, e.Type, id, ok, got == e.Said)
			}
		case ok:
			t.Errorf("line %d (%s %s) announced", e.Line, e.Type, id)
		}
	}
	if want := "assistant assistant user assistant notification assistant assistant"; strings.Join(checked, " ") != want {
		t.Fatalf("checked %v; the recording holds %s", checked, want)
	}
}

// replayRecording reads testdata/dir's stdout as the CLI's.
func replayRecording(t *testing.T, dir string) *Conn {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", dir, "stdout.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return replayLines(t, engine.Options{Execution: "x1"}, strings.Split(strings.TrimSpace(string(raw)), "\n")...)
}

// readRecording reads testdata/dir's transcript.
func readRecording(t *testing.T, dir, project, session string) *hclaude.Transcript {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", dir, "transcript.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	ref := hclaude.Ref{ConfigDir: t.TempDir(), Project: project, Session: session}
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

// TestNotifiedSeeded: the counts of the task notifications one Conn
// announced (LatestNotified) are counted by the next once it takes them
// (SeedNotified), added to its own: the notification's line, landing
// after a restart or a crash, is proven by the frame the previous
// controller read.
func TestNotifiedSeeded(t *testing.T) {
	old := replayRecording(t, "background")
	tr := readRecording(t, "background", backgroundProject, backgroundSession)
	var said hclaude.Said
	for _, id := range tr.Order() {
		if e, _ := tr.Entry(id); e.Notification {
			said = e.Said
		}
	}
	if old.Notified(said) != 1 {
		t.Fatalf("the recording's notification counted %d times; want once", old.Notified(said))
	}
	ns := old.LatestNotified(64)
	if len(ns) != 1 || ns[0].Said != said || ns[0].N != 1 {
		t.Fatalf("LatestNotified %+v; want the one notification, once", ns)
	}
	next := replayLines(t, engine.Options{Execution: "x2"}, `{"type":"system","subtype":"init","session_id":""}`)
	if next.Notified(said) != 0 {
		t.Fatal("a fresh Conn counts the notification")
	}
	next.SeedNotified(append(ns, Notice{Said: hclaude.Said{1}, N: 0}))
	next.SeedNotified(ns)
	if got := next.Notified(said); got != 2 {
		t.Fatalf("after two seeds the notification counts %d; want 2 (counts add up)", got)
	}
	if next.Notified(hclaude.Said{1}) != 0 {
		t.Fatal("a count of 0 was seeded")
	}
}
