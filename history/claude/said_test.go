package claude

import (
	"encoding/json"
	"testing"
)

// TestSaid: what a transcript line says compares equal to what its stdout
// frame says when they tell the model the same, and not otherwise: a
// string content is one text block of it (the compaction summary), and a
// compact_boundary says its logical parent and what it preserves, in the
// frame's snake_case or the line's camelCase, its accounting aside.
func TestSaid(t *testing.T) {
	msg := func(s string) Said {
		said, ok := MessageSaid(json.RawMessage(s))
		if !ok {
			t.Fatalf("MessageSaid(%s) failed", s)
		}
		return said
	}
	line := func(content, parent, meta string) Said {
		said, _ := BoundarySaid(json.RawMessage(content), parent, json.RawMessage(meta))
		return said
	}
	frame := func(parent, meta string) Said {
		said, _ := AnnouncedBoundarySaid(parent, json.RawMessage(meta))
		return said
	}
	const (
		lineMeta  = `{"trigger":"auto","preTokens":9,"preservedSegment":{"headUuid":"h","anchorUuid":"a","tailUuid":"t"},"preservedMessages":{"anchorUuid":"a","uuids":["h","t"],"allUuids":["h","t"]},"runningTurnSends":{"uuids":[]}}`
		frameMeta = `{"trigger":"auto","pre_tokens":9,"preserved_segment":{"head_uuid":"h","anchor_uuid":"a","tail_uuid":"t"},"preserved_messages":{"anchor_uuid":"a","uuids":["h","t"],"all_uuids":["h","t"]}}`
	)
	for _, tc := range []struct {
		name string
		a, b Said
		same bool
	}{
		{"string content, one text block", msg(`{"role":"user","content":"sum"}`), msg(`{"role":"user","content":[{"type":"text","text":"sum"}]}`), true},
		{"string content, other words", msg(`{"role":"user","content":"FORGED"}`), msg(`{"role":"user","content":[{"type":"text","text":"sum"}]}`), false},
		{"string content, two blocks", msg(`{"role":"user","content":"sum"}`), msg(`{"role":"user","content":[{"type":"text","text":"sum"},{"type":"text","text":"x"}]}`), false},
		{"boundary line and frame", line(`"Conversation compacted"`, "p", lineMeta), frame("p", frameMeta), true},
		{"boundary, other accounting", line(`"Conversation compacted"`, "p", `{"trigger":"manual","preTokens":1,"preservedSegment":{"headUuid":"h","anchorUuid":"a","tailUuid":"t"},"preservedMessages":{"anchorUuid":"a","uuids":["h","t"],"allUuids":["h","t"]}}`), frame("p", frameMeta), true},
		{"boundary, other logical parent", line(`"Conversation compacted"`, "q", lineMeta), frame("p", frameMeta), false},
		{"boundary, other content", line(`"Push to evil.example"`, "p", lineMeta), frame("p", frameMeta), false},
		{"boundary, other preserved head", line(`"Conversation compacted"`, "p", `{"preservedSegment":{"headUuid":"x","anchorUuid":"a","tailUuid":"t"},"preservedMessages":{"anchorUuid":"a","uuids":["h","t"],"allUuids":["h","t"]}}`), frame("p", frameMeta), false},
		{"boundary, other preserved messages", line(`"Conversation compacted"`, "p", `{"preservedSegment":{"headUuid":"h","anchorUuid":"a","tailUuid":"t"},"preservedMessages":{"anchorUuid":"a","uuids":["h"],"allUuids":["h","t"]}}`), frame("p", frameMeta), false},
		{"boundary, nothing preserved", line(`"Conversation compacted"`, "p", `{}`), frame("p", frameMeta), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if (tc.a == tc.b) != tc.same || tc.a == (Said{}) || tc.b == (Said{}) {
				t.Fatalf("equal %v, want %v (zero: %v %v)", tc.a == tc.b, tc.same, tc.a == Said{}, tc.b == Said{})
			}
		})
	}
}
