package fakepi_test

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"testing"

	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
)

// TestEntriesAreTheFileLines: each entry get_entries returns is, as a JSON
// value, the line the engine appended to the session file for it, after a
// turn with a tool call and after an aborted one. The controller's session
// watch compares the two (W10: an entry edited before its check, its id
// kept, is another writer's).
func TestEntriesAreTheFileLines(t *testing.T) {
	forEach(t, func(t *testing.T, e engine) {
		script := stubmodel.Script{Turns: []stubmodel.Turn{
			{Text: []string{"Hello! ", "Listing."}, Tool: &stubmodel.ToolCall{Command: "echo listed"}},
			{Text: []string{"Done ", "listing."}},
			{Endless: true, ChunkDelayMS: 50},
		}}
		p := start(t, e, options{model: true, script: script})
		p.call(map[string]any{"type": "prompt", "id": "p1", "message": "list the files, please \u00e9 \u2603"})
		p.until("agent_settled", isKind("agent_settled"))
		p.call(map[string]any{"type": "prompt", "id": "p2", "message": "go on"})
		p.until("streaming", isKind("message_update:text_delta"))
		p.call(map[string]any{"type": "abort", "id": "a1"}) // answered after agent_settled
		ge := last(p.call(map[string]any{"type": "get_entries", "id": "ge"})).obj("data")
		ents, _ := ge["entries"].([]any)
		held := map[string]any{}
		for _, x := range ents {
			m := x.(map[string]any)
			held[rec(m).str("id")] = m
		}
		b, err := os.ReadFile(p.session)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for l := range bytes.SplitSeq(b, []byte{'\n'}) {
			var line map[string]any
			if len(l) == 0 || json.Unmarshal(l, &line) != nil || line["type"] == "session" {
				continue
			}
			id := rec(line).str("id")
			want, ok := held[id]
			if !ok {
				t.Errorf("line of entry %s: not among get_entries", id)
				continue
			}
			// Both through the same decoder the controller uses.
			var a, c any
			wb, _ := json.Marshal(want)
			json.Unmarshal(wb, &c)
			json.Unmarshal(l, &a)
			if !reflect.DeepEqual(a, c) {
				t.Errorf("entry %s:\nfile   %s\nengine %s", id, l, wb)
			}
			n++
		}
		if n < 6 {
			t.Errorf("only %d entries compared", n)
		}
		t.Logf("%d entries compared", n)
	})
}
