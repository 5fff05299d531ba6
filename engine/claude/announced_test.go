package claude

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/engine"
	hclaude "github.com/mosaic-agents/mosaic/history/claude"
	"github.com/mosaic-agents/mosaic/protocol"
)

// TestGoldenAnnounced: every assistant and tool result line of the golden
// transcript, and the CLI's interrupt marker, says what the recorded
// stdout announced under its uuid (the session watch vouches for it), and
// the recording announced nothing under the uuid of any other line (the
// prompts are announced by Prompt, the attachments by nobody).
func TestGoldenAnnounced(t *testing.T) {
	_, c := replay(t, "rec_golden.jsonl")
	ref := hclaude.Ref{ConfigDir: t.TempDir(), Project: "/scratch/scratch/golden/work", Session: "fb45a767-d14b-4efd-a4eb-cffcf589f9f1"}
	path, err := ref.Path()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join("..", "..", "history", "claude", "testdata", "transcript_golden.jsonl"))
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
	checked := 0
	for _, id := range tr.Order() {
		e, _ := tr.Entry(id)
		got, ok := c.Announced(id)
		switch {
		case e.Type == "assistant" || e.Type == "user" && !e.Prompt:
			checked++
			if !ok || got != e.Said {
				t.Errorf("line %d (%s %s): announced %v, says what was announced %v", e.Line, e.Type, id, ok, got == e.Said)
			}
		case ok:
			t.Errorf("line %d (%s %s) announced", e.Line, e.Type, id)
		}
	}
	if checked != 10 {
		t.Fatalf("%d lines checked; the golden transcript holds 10 the CLI announced", checked)
	}
}

// TestAnnouncedBounded: a Conn keeps the latest maxAnnounced
// announcements, forgets the oldest, keeps none of a frame framing cut,
// and a uuid announced twice with other words says what no line says.
func TestAnnouncedBounded(t *testing.T) {
	frame := func(id, text string) string {
		return fmt.Sprintf(`{"type":"assistant","uuid":%q,"session_id":"","message":{"role":"assistant","content":[{"type":"text","text":%q}]}}`, id, text)
	}
	said := func(text string) hclaude.Said {
		s, _ := hclaude.MessageSaid([]byte(fmt.Sprintf(`{"role":"assistant","content":[{"type":"text","text":%q}]}`, text)))
		return s
	}
	cases := []struct {
		name   string
		frames []string
		opts   engine.Options
		id     string
		want   hclaude.Said
		known  bool
	}{
		{name: "announced", frames: []string{frame("a1", "hello")}, id: "a1", want: said("hello"), known: true},
		{name: "announced twice alike", frames: []string{frame("a1", "hello"), frame("a1", "hello")}, id: "a1", want: said("hello"), known: true},
		{name: "announced twice, other words", frames: []string{frame("a1", "hello"), frame("a1", "FORGED")}, id: "a1", known: true},
		{name: "cut by framing: its uuid alone", frames: []string{frame("a1", strings.Repeat("x", 8000))}, opts: engine.Options{MaxLine: 4096, LineLimit: 1 << 20}, id: "a1",
			want: hclaude.CutSaid("assistant"), known: true},
		{name: "the oldest past the bound", frames: func() []string {
			out := []string{frame("a0", "first")}
			for i := range maxAnnounced {
				out = append(out, frame(fmt.Sprint("n", i), "later"))
			}
			return out
		}(), id: "a0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Execution = "x1"
			c := replayLines(t, tc.opts, tc.frames...)
			got, known := c.Announced(tc.id)
			if known != tc.known || got != tc.want {
				t.Fatalf("Announced(%s) = %x, %v; want %x, %v", tc.id, got[:4], known, tc.want[:4], tc.known)
			}
			if n := c.announced.Len(); n > maxAnnounced {
				t.Fatalf("%d announcements kept; the bound is %d", n, maxAnnounced)
			}
		})
	}
}

// replayLines reads lines as the CLI's stdout to their end.
func replayLines(t *testing.T, opts engine.Options, lines ...string) *Conn {
	t.Helper()
	c, err := New(strings.NewReader(strings.Join(lines, "\n")+"\n"), nopWriter{}, "", opts)
	if err != nil {
		t.Fatal(err)
	}
	for range c.Events() {
	}
	return c
}

// TestSentBounded: a Conn remembers the uuids of the latest maxAnnounced
// prompts it sent, and what each said, and forgets the older: an engine
// that runs for days and thousands of prompts holds no more.
func TestSentBounded(t *testing.T) {
	p := newPeer(t, 5*time.Second)
	var ids []string
	for i := range maxAnnounced + 1 {
		id := p.startTurn(fmt.Sprint("prompt ", i))
		p.send(result)
		p.event("run-settled", func(e protocol.Event) bool { return e.Kind == protocol.EventRunSettled })
		ids = append(ids, id)
	}
	first, last := ids[0], ids[len(ids)-1]
	if p.c.SentPrompt(first) {
		t.Errorf("the prompt %d prompts ago is still remembered", maxAnnounced)
	}
	if _, ok := p.c.Announced(first); ok {
		t.Errorf("what the prompt %d prompts ago said is still remembered", maxAnnounced)
	}
	if !p.c.SentPrompt(last) || !p.c.SentPrompt(ids[1]) {
		t.Errorf("the latest %d prompts are not all remembered", maxAnnounced)
	}
	if got, _ := p.c.Announced(last); got != promptSaid(fmt.Sprint("prompt ", maxAnnounced)) {
		t.Errorf("the last prompt's words are not remembered")
	}
	p.c.mu.Lock()
	n := p.c.sent.Len()
	p.c.mu.Unlock()
	if n > maxAnnounced {
		t.Fatalf("%d prompt uuids kept; the bound is %d", n, maxAnnounced)
	}
}

// TestLatestSeed: what one Conn announced (frames read, a prompt sent),
// handed to another (Latest, then Seed), is announced there too, the
// prompt as sent; a uuid the second announced with other words becomes
// ambiguous, and the latest n alone are handed.
func TestLatestSeed(t *testing.T) {
	frame := func(id, text string) string {
		return fmt.Sprintf(`{"type":"assistant","uuid":%q,"session_id":"","message":{"role":"assistant","content":[{"type":"text","text":%q}]}}`, id, text)
	}
	p := newPeer(t, 5*time.Second)
	prompt := p.startTurn("hello")
	p.send(result)
	p.event("run-settled", func(e protocol.Event) bool { return e.Kind == protocol.EventRunSettled })
	old := replayLines(t, engine.Options{Execution: "x1"}, frame("a0", "oldest"), frame("a1", "hello"), frame("a2", "again"))
	handed := append(old.Latest(2), p.c.Latest(1)...)
	if len(handed) != 3 || handed[0].UUID != "a1" || handed[1].UUID != "a2" || handed[2].UUID != prompt || !handed[2].Prompt || handed[0].Prompt {
		t.Fatalf("handed %+v; want a1, a2 and the prompt %s", handed, prompt)
	}
	next := replayLines(t, engine.Options{Execution: "x2", Resume: false}, frame("a2", "other words"))
	next.Seed(handed)
	if got, ok := next.Announced("a1"); !ok || got != handed[0].Said {
		t.Fatalf("a1 after the seed: %x %v", got[:4], ok)
	}
	if got, ok := next.Announced("a2"); !ok || got != ambiguous {
		t.Fatalf("a2, announced here with other words: %x %v; want ambiguous", got[:4], ok)
	}
	if !next.SentPrompt(prompt) || next.SentPrompt("a1") {
		t.Fatal("the seed did not keep which uuid is a prompt sent")
	}
	if _, ok := next.Announced("a0"); ok {
		t.Fatal("an announcement older than the latest 2 was handed")
	}
}
