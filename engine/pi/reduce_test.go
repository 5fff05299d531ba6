package pi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/protocol"
)

// TestLargeMessageTruncatedNotLost: an 18 MiB assistant message reaches
// the Events as a message-end whose block says truncated, with the first
// MaxLiveString bytes of its text; the binding is not uncertain and the
// next prompt is admitted.
func TestLargeMessageTruncatedNotLost(t *testing.T) {
	p := startPeer(t, engine.Options{})
	text := strings.Repeat("0123456789abcdef", 18<<16) // 18 MiB
	start, _ := json.Marshal(map[string]any{"type": "message_start", "message": map[string]any{"role": "assistant", "content": []any{}}})
	delta, _ := json.Marshal(map[string]any{"type": "message_update", "assistantMessageEvent": map[string]any{"type": "text_delta", "contentIndex": 0, "delta": text}})
	end, _ := json.Marshal(map[string]any{"type": "message_end", "message": map[string]any{"role": "assistant",
		"content": []any{map[string]any{"type": "text", "text": text}, map[string]any{"type": "text", "text": "tail"}}, "stopReason": "stop"}})
	p.emit(string(start), string(delta), string(end), `{"type":"agent_settled"}`)
	p.sync()
	if s := p.conn.State(); s.Uncertain {
		t.Fatalf("an 18 MiB message made the connection uncertain: %v", s.Reasons)
	}
	done := make(chan error, 1)
	go func() { _, err := p.conn.Prompt(context.Background(), "next"); done <- err }()
	p.respond(p.next("prompt"), nil)
	if err := <-done; err != nil {
		t.Fatalf("prompt after the large message: %v", err)
	}
	ev := p.drain()
	if len(ev) != 4 {
		t.Fatalf("events %d, want 4", len(ev))
	}
	d, e := ev[1], ev[2]
	if d.Kind != protocol.EventTextDelta || !d.Truncated || len(d.Text) != engine.MaxLiveString || !strings.HasPrefix(text, d.Text) {
		t.Fatalf("delta: kind %s truncated %v, %d bytes", d.Kind, d.Truncated, len(d.Text))
	}
	if e.Kind != protocol.EventMessageEnd || !e.Truncated || len(e.Content) != 2 || !e.Content[0].Truncated ||
		e.Content[0].Text != text[:engine.MaxLiveString] || e.Content[1].Truncated || e.Content[1].Text != "tail" {
		t.Fatalf("message-end: truncated %v, %d blocks", e.Truncated, len(e.Content))
	}
	if b, _ := json.Marshal(e); len(b) > 4*engine.MaxLiveString {
		t.Fatalf("message-end encodes to %d bytes", len(b))
	}
}

// TestBudget: the wait grows with the bytes, from the command timeout.
func TestBudget(t *testing.T) {
	for _, tc := range []struct {
		base time.Duration
		size int64
		want time.Duration
	}{
		{0, 0, engine.DefaultCommandTimeout},
		{5 * time.Second, PerSecond - 1, 5 * time.Second},
		{5 * time.Second, 256 << 20, 5*time.Second + 64*time.Second},
	} {
		if got := Budget(tc.base, tc.size); got != tc.want {
			t.Errorf("Budget(%s, %d) = %s, want %s", tc.base, tc.size, got, tc.want)
		}
	}
}

// TestLongPromptStillStarts: a prompt whose user message comes back over
// the framing's string bound (every character escaped) is still the
// slot's item once Pi echoes it, not an external message.
func TestLongPromptStillStarts(t *testing.T) {
	p := startPeer(t, engine.Options{})
	text := strings.Repeat("\x01", 262144) // 1.5 MiB as JSON
	done := make(chan error, 1)
	go func() { _, err := p.conn.Prompt(context.Background(), text); done <- err }()
	p.respond(p.next("prompt"), nil)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	p.emit(userMessage(text)...)
	p.sync()
	if s := p.conn.State(); s.Slot == nil || !s.Slot.Started || s.ExternalUser != 0 {
		t.Fatalf("slot %+v, external %d", s.Slot, s.ExternalUser)
	}
}

// TestAnswerTooLargeIsRefused: a get_entries answer so large that framing
// left entries out is an error, never a shorter list read as whole; one
// whose long strings were cut is still the answer (ids stay whole).
func TestAnswerTooLargeIsRefused(t *testing.T) {
	p := startPeer(t, engine.Options{})
	entry := func(i int, text string) map[string]any {
		return map[string]any{"type": "message", "id": fmt.Sprintf("e%07d", i), "parentId": nil,
			"message": map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": text}}}}
	}
	ask := func() (Entries, error) {
		type res struct {
			e   Entries
			err error
		}
		r := make(chan res, 1)
		go func() { e, err := p.conn.GetEntries(context.Background(), "x"); r <- res{e, err} }()
		cmd := p.next("get_entries")
		var many []any
		if len(p.cmds) == 0 && cmd["since"] == "x" {
			for i := range 4000 {
				many = append(many, entry(i, strings.Repeat("t", 1000)))
			}
		}
		p.respond(cmd, map[string]any{"entries": many, "leafId": "e0003999"})
		got := <-r
		return got.e, got.err
	}
	if _, err := ask(); !errors.Is(err, ErrAnswerTooLarge) {
		t.Fatalf("4 MB of entries: %v, want ErrAnswerTooLarge", err)
	}

	r := make(chan error, 1)
	var got Entries
	go func() {
		var err error
		got, err = p.conn.GetEntries(context.Background(), "")
		r <- err
	}()
	p.respond(p.next("get_entries"), map[string]any{"entries": []any{entry(0, "short"), entry(1, strings.Repeat("u", 3<<20))}, "leafId": "e0000001"})
	if err := <-r; err != nil || len(got.Entries) != 2 || got.LeafID != "e0000001" || !strings.Contains(string(got.Entries[1]), `"id":"e0000001"`) {
		t.Fatalf("one 3 MiB entry: %v, %d entries, leaf %q", err, len(got.Entries), got.LeafID)
	}
	// Which entry was cut is said, so no caller takes its words for Pi's.
	if !slices.Equal(got.Cut, []bool{false, true}) {
		t.Fatalf("cut entries %v; want the 3 MiB one alone", got.Cut)
	}
}
