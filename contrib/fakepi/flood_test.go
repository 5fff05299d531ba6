package fakepi_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/contrib/fakepi"
	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
)

// TestFlood: FAKEPI_FLOOD=n answers with exactly n stamped text deltas in
// write order, a scripted tool call is dropped, and the final message
// holds the same text.
func TestFlood(t *testing.T) {
	const n = 50
	script := stubmodel.Script{Turns: []stubmodel.Turn{{Text: []string{"scripted"}, Tool: &stubmodel.ToolCall{Command: "true"}}}}
	p := start(t, fakeEngine(), options{model: true, script: script, env: []string{fakepi.EnvFlood + "=" + strconv.Itoa(n)}})
	p.call(map[string]any{"type": "prompt", "id": "p", "message": "flood"})
	got := p.until("agent_settled", isKind("agent_settled"))
	var deltas []string
	var final string
	for _, r := range got {
		switch r.kind() {
		case "message_update:text_delta":
			deltas = append(deltas, r.obj("assistantMessageEvent").str("delta"))
		case "message_update:toolcall_start":
			t.Fatal("the scripted tool call was streamed in flood mode")
		case "message_end:assistant:stop":
			parts, _ := r.obj("message")["content"].([]any)
			if len(parts) != 1 {
				t.Fatalf("final content %v", parts)
			}
			final = rec(parts[0].(map[string]any)).str("text")
		}
	}
	if len(deltas) != n {
		t.Fatalf("%d deltas, want %d", len(deltas), n)
	}
	var prev int64
	for i, d := range deltas {
		ns, err := strconv.ParseInt(strings.TrimSuffix(d, " "), 10, 64)
		if err != nil || !strings.HasSuffix(d, " ") || ns < prev {
			t.Fatalf("delta %d is %q (previous stamp %d): want a non-decreasing stamp and a space", i, d, prev)
		}
		prev = ns
	}
	if final != strings.Join(deltas, "") {
		t.Fatalf("final text %q is not the deltas %q", final, strings.Join(deltas, ""))
	}
}
