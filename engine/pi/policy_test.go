package pi

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/mosaic-agents/mosaic/engine"
)

// TestS1: a leading slash command refuses text-policy with or without
// leading white space, and zero bytes reach the engine.
func TestS1(t *testing.T) {
	p := startPeer(t, engine.Options{})
	for _, text := range []string{"/goal x", "  /goal x", "\t/goal x", "\n/goal x", "\u00a0/goal x", "\u200b/goal x", "\ufeff/goal x", "\u202e/goal x", "\u3000/goal x"} {
		t.Run(text, func(t *testing.T) {
			if _, err := p.conn.Prompt(context.Background(), text); code(err) != "text-policy" {
				t.Fatalf("Prompt(%q) = %v", text, err)
			}
		})
	}
	p.sync()
	if got := p.stdinPrompts(); len(got) != 0 {
		t.Fatalf("bytes reached the engine: %q", got)
	}
}

// TestS2 walks the one table: every interpreted prefix refuses, bare and
// after white space; every prefix Pi does not interpret is admitted.
func TestS2(t *testing.T) {
	for _, p := range engine.Prefixes {
		for _, lead := range []string{"", " ", "\t \r\n"} {
			text := lead + p.Prefix + "name args"
			err := engine.CheckText(text)
			switch {
			case p.Interpreted && code(err) != "text-policy":
				t.Errorf("%q (%s) admitted: %v", text, p.Source, err)
			case !p.Interpreted && err != nil:
				t.Errorf("%q (%s) refused: %v", text, p.Source, err)
			}
		}
		if p.Source == "" || p.What == "" {
			t.Errorf("prefix %q has no source", p.Prefix)
		}
	}
}

// TestS3: a slash on a later line is admitted, because pinned Pi looks
// only at index 0; the prompt goes out as one record with the exact text.
func TestS3(t *testing.T) {
	if engine.LaterLineSlashInterpreted {
		t.Fatal("table says later lines are interpreted; S3 expects refusal then")
	}
	p := startPeer(t, engine.Options{})
	text := "please read this\n/goal x"
	p.acked(text)
	if got := p.stdinPrompts(); len(got) != 1 || got[0] != text {
		t.Fatalf("engine got %q", got)
	}
}

// TestS7: ESC, bracketed-paste markers and U+2028 reach the engine as one
// record whose message is the exact text.
func TestS7(t *testing.T) {
	p := startPeer(t, engine.Options{})
	text := "a\x1b[200~pasted\nline\x1b[201~ b\u2028c\u2029d\r\n"
	p.acked(text)
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.stdin) != 1 {
		t.Fatalf("engine got %d records", len(p.stdin))
	}
	var m map[string]any
	if err := json.Unmarshal(p.stdin[0], &m); err != nil || m["message"] != text {
		t.Fatalf("engine got %q (%v)", p.stdin[0], err)
	}
}

func TestPromptRefusesInvalidUTF8(t *testing.T) {
	p := startPeer(t, engine.Options{})
	if _, err := p.conn.Prompt(context.Background(), "a\xffb"); code(err) != "malformed" {
		t.Fatalf("got %v", err)
	}
}
