package claude

import (
	"encoding/json"

	hclaude "github.com/mosaic-agents/mosaic/history/claude"
)

// The lines the CLI announced (Conn.Announced).
//
// Every assistant and non-prompt user line of the transcript has a stdout
// frame under the same uuid, written before the line (measured: 6 to 80
// ms before), whose message says the same to the model: the same role
// and content (DIGEST §8; transcript_golden.jsonl against
// rec_golden.jsonl, every such line). A prompt line's uuid is the one
// Prompt sent, and its content the text it sent. So the transcript watch
// vouches for such a line only when it says what was announced under its
// uuid (controller/claudewatch.go); what a tool in the engine appends
// was announced by nobody.

// maxAnnounced bounds the announcements a Conn keeps (each a uuid of at
// most engine.MaxRecentKey bytes and a digest: under 5 MiB): the watch
// needs one only until its next polls find the line.
const maxAnnounced = 4096

// ambiguous is kept for a uuid announced twice with different words:
// either may be the line, so it says what no line says (the zero Said)
// and the line is refused rather than taken for one of them.
var ambiguous = hclaude.Said{}

// announce keeps what f says under its uuid: an assistant, user or
// system frame. One whose line framing cut it (over the engine's
// MaxLine: an 18 MiB answer, a Read of a large image) says what its
// strings said only in part: an assistant or user frame is then kept as
// hclaude.CutSaid, its uuid alone, which refusing would close admission
// on every such honest line. c.mu held.
func (c *Conn) announce(f *frame, cut bool) {
	if f.UUID == "" {
		return
	}
	if f.ParentToolUseID != nil && *f.ParentToolUseID != "" {
		// A subagent's message: its line is written to the subagent's
		// own transcript (a tool can read it), never to the session's
		// main chain, so it vouches for no line there (measured with
		// the real CLI; controller.TestSubagentFramesProveNothing).
		return
	}
	if cut {
		if f.Type == "assistant" || f.Type == "user" {
			c.putAnnounced(f.UUID, hclaude.CutSaid(f.Type))
		}
		return
	}
	var said hclaude.Said
	var ok bool
	switch {
	case f.Type == "assistant" || f.Type == "user":
		said, ok = hclaude.MessageSaid(f.Message)
	case f.Type == "system" && f.Subtype == "task_notification":
		// Its line carries another uuid: kept by what it says.
		n := hclaude.NotificationSaid(f.TaskID, f.ToolUseID, f.OutputFile, f.Status, f.Summary)
		k := string(n[:])
		was, _ := c.notified.Get(k)
		c.notified.Put(k, was+1)
		c.poke()
	case f.Type == "system" && f.Subtype == "compact_boundary":
		said, ok = hclaude.AnnouncedBoundarySaid(f.LogicalParentUUID, f.CompactMetadata)
	case f.Type == "system":
		said, ok = hclaude.SystemSaid(f.Subtype, f.Content)
	}
	if ok {
		c.putAnnounced(f.UUID, said)
	}
}

// putAnnounced keeps said under id, or ambiguous if id was announced
// with other words. c.mu held.
func (c *Conn) putAnnounced(id string, said hclaude.Said) {
	if was, ok := c.announced.Get(id); ok && was != said {
		said = ambiguous
	}
	c.announced.Put(id, said)
	c.poke()
}

// poke says an announcement was kept (Announcing). c.mu held.
func (c *Conn) poke() {
	select {
	case c.announcing <- struct{}{}:
	default:
	}
}

// Announcing is poked each time an announcement is kept (a frame read, a
// prompt sent, a Seed, a task notification counted), at most one poke
// waiting: a reader that wakes
// reads Latest once for all the announcements since its last read. The
// controller keeps what Latest says where a crash does not take it
// (controller/mark.go).
func (c *Conn) Announcing() <-chan struct{} { return c.announcing }

// Notified counts the task_notification frames the CLI announced, among
// the latest maxAnnounced, whose line would say said: the CLI writes one
// line for each (with a uuid of its own, not the frame's).
func (c *Conn) Notified(said hclaude.Said) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, _ := c.notified.Get(string(said[:]))
	return n
}

// promptSaid is what the transcript's line of a prompt of text says: the
// message Prompt sends.
func promptSaid(text string) hclaude.Said {
	raw, _ := json.Marshal(map[string]any{"role": "user", "content": []map[string]string{{"type": "text", "text": text}}})
	said, _ := hclaude.MessageSaid(raw)
	return said
}

// Announced returns what the CLI announced under uuid id (a frame, or a
// prompt this Conn sent), and whether it announced anything under it
// among the latest maxAnnounced. A uuid announced twice with different
// words returns the zero Said, which no line says.
func (c *Conn) Announced(id string) (hclaude.Said, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.announced.Get(id)
}

// Handed is one announcement a restarting controller hands the next
// (Latest, then Seed): the uuid of a frame the CLI wrote, or of a prompt
// this Conn sent, and what its line says. The CLI writes a line 6 to 80
// ms after its frame, so a frame the old controller read just before it
// exited has its line land after the restart, when only the old
// controller could have proven it.
type Handed struct {
	UUID   string
	Said   hclaude.Said
	Prompt bool // a prompt this Conn sent (SentPrompt)
}

// Latest returns the latest n announcements, prompts among them, oldest
// first.
func (c *Conn) Latest(n int) []Handed {
	c.mu.Lock()
	defer c.mu.Unlock()
	keys, vals := c.announced.Latest(n)
	out := make([]Handed, len(keys))
	for i, k := range keys {
		_, sent := c.sent.Get(k)
		out[i] = Handed{UUID: k, Said: vals[i], Prompt: sent}
	}
	return out
}

// Seed takes what the previous controller's Conn announced (Latest) as
// announced here, for the lines of its frames and prompts that land after
// a re-attach. A uuid this Conn announced too, with other words, is
// ambiguous (putAnnounced): its line is refused.
func (c *Conn) Seed(hs []Handed) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, h := range hs {
		c.putAnnounced(h.UUID, h.Said)
		if h.Prompt {
			c.sent.Put(h.UUID, struct{}{})
		}
	}
}

// Notice is what a controller hands the next of the task notifications
// its Conn counted (LatestNotified, then SeedNotified): what their line
// says and how many frames announced it. A notification's line carries a
// uuid of its own, not its frame's, so it is proven by this count, and a
// line that lands after a restart or a crash needs the count the
// previous controller read.
type Notice struct {
	Said hclaude.Said
	N    int
}

// LatestNotified returns the counts of the latest n task notifications
// announced, oldest first.
func (c *Conn) LatestNotified(n int) []Notice {
	c.mu.Lock()
	defer c.mu.Unlock()
	keys, vals := c.notified.Latest(n)
	out := make([]Notice, 0, len(keys))
	for i, k := range keys {
		var s hclaude.Said
		if len(k) != len(s) {
			continue
		}
		copy(s[:], k)
		out = append(out, Notice{Said: s, N: vals[i]})
	}
	return out
}

// SeedNotified adds what the previous controller's Conn counted
// (LatestNotified) to this Conn's counts: the frames it read are frames
// of the same engine, whose lines may land now.
func (c *Conn) SeedNotified(ns []Notice) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range ns {
		if n.N <= 0 {
			continue
		}
		k := string(n.Said[:])
		was, _ := c.notified.Get(k)
		c.notified.Put(k, was+n.N)
	}
	c.poke()
}
