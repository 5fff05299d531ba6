package pi

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/engine"
)

// TestEntriesAnnounced: get_entries' answer carries, beside each entry Pi
// announced when it appended it, the entry as announced: an extension's
// appendEntry (entry_appended) and a tool's result (the message_end of
// the toolResult message the entry wraps, named by its tool call and
// timestamp). Pi keeps the extension's objects, so the entry it returns
// later shows the extension's changes since, while the file line and the
// event show it as written. An entry not announced, announced on a line
// framing cut, over the bound, or a result of the same call at another
// time has none.
func TestEntriesAnnounced(t *testing.T) {
	const (
		written = `{"type":"custom","customType":"s","data":{"saves":1},"id":"c1","parentId":"m1","timestamp":"t"}`
		result  = `{"role":"toolResult","toolCallId":"call_1","toolName":"todo","content":[{"type":"text","text":"toggled"}],"details":{"done":true},"isError":false,"timestamp":1796204005346}`
		// The entry that wraps result, with the message as announced.
		resultEntry = `{"type":"message","id":"r1","parentId":"c1","timestamp":"t","message":` + result + `}`
	)
	now := map[string]any{"type": "custom", "customType": "s", "data": map[string]any{"saves": 2}, "id": "c1", "parentId": "m1", "timestamp": "t"}
	// A custom message entry whose details the extension changed since.
	noteEntry := func(details string) string {
		return `{"type":"custom_message","customType":"status","content":"live","display":true,` + details + `"id":"n1","parentId":"r1","timestamp":"t"}`
	}
	noteNow := map[string]any{"type": "custom_message", "customType": "status", "content": "live", "display": true, "details": map[string]any{"count": 2}, "id": "n1", "parentId": "r1", "timestamp": "t"}
	resultNow := map[string]any{"type": "message", "id": "r1", "parentId": "c1", "timestamp": "t", "message": map[string]any{
		"role": "toolResult", "toolCallId": "call_1", "toolName": "todo", "content": []any{map[string]any{"type": "text", "text": "toggled"}},
		"details": map[string]any{"done": false}, "isError": false, "timestamp": json.Number("1796204005346")}}
	entry := func(n int) string {
		return `{"type":"custom","customType":"s","data":"` + strings.Repeat("x", n) + `","id":"c1","parentId":"m1","timestamp":"t"}`
	}
	cases := []struct {
		name   string
		events []string
		opts   engine.Options
		want   map[string][]string // id -> the entry as announced, each way (none: nil)
	}{
		{name: "announced", events: []string{`{"type":"entry_appended","entry":` + written + `}`}, want: map[string][]string{"c1": {written}}},
		{name: "not announced", want: nil},
		{name: "over the bound", events: []string{`{"type":"entry_appended","entry":` + entry(maxAnnouncedEntry) + `}`}, want: nil},
		{name: "cut by framing", events: []string{`{"type":"entry_appended","entry":` + entry(8000) + `}`}, opts: engine.Options{MaxLine: 4096, LineLimit: 1 << 20}, want: nil},
		{name: "tool result announced", events: []string{`{"type":"message_end","message":` + result + `}`}, want: map[string][]string{"r1": {resultEntry}}},
		{name: "two results of the same call at the same time", events: []string{
			`{"type":"message_end","message":` + result + `}`,
			`{"type":"message_end","message":` + strings.Replace(result, "toggled", "FORGED", 1) + `}`,
		}, want: nil},
		{name: "the same result announced twice", events: []string{
			`{"type":"message_end","message":` + result + `}`,
			`{"type":"message_end","message":` + result + `}`,
		}, want: map[string][]string{"r1": {resultEntry}}},
		{name: "an entry id announced twice", events: []string{
			`{"type":"entry_appended","entry":` + written + `}`,
			`{"type":"entry_appended","entry":` + strings.Replace(written, `"saves":1`, `"saves":9`, 1) + `}`,
		}, want: nil},
		{name: "a result of the same call at another time", events: []string{`{"type":"message_end","message":` + strings.Replace(result, "1796204005346", "1796204005347", 1) + `}`}, want: nil},
		{name: "custom messages of its type and content", events: []string{
			`{"type":"message_end","message":{"role":"custom","customType":"status","content":"live","display":true,"details":{"count":1},"timestamp":5}}`,
			`{"type":"message_end","message":{"role":"custom","customType":"status","content":"other","display":true,"details":{"count":7},"timestamp":6}}`,
			`{"type":"message_end","message":{"role":"custom","customType":"status","content":"live","display":true,"timestamp":7}}`,
		}, want: map[string][]string{"n1": {noteEntry(""), noteEntry(`"details":{"count":1},`)}}},
		{name: "the newest few custom messages, each details once", events: notes(1, 3, 4, 4, 5, 6), want: map[string][]string{"n1": {
			noteEntry(`"details":{"count":6},`), noteEntry(`"details":{"count":5},`), noteEntry(`"details":{"count":4},`), noteEntry(`"details":{"count":3},`)}}},
		{name: "another message's end", events: []string{`{"type":"message_end","message":` + strings.Replace(result, `"toolResult"`, `"user"`, 1) + `}`}, want: nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := startPeer(t, tc.opts)
			p.emit(tc.events...)
			type res struct {
				e   Entries
				err error
			}
			r := make(chan res, 1)
			go func() { e, err := p.conn.GetEntries(context.Background(), ""); r <- res{e, err} }()
			p.respond(p.next("get_entries"), map[string]any{"leafId": "c1", "entries": []any{
				map[string]any{"type": "message", "id": "m1", "parentId": nil, "message": map[string]any{"role": "user", "content": "hi", "timestamp": 1}},
				now,
				resultNow,
				noteNow,
			}})
			got := <-r
			if got.err != nil {
				t.Fatal(got.err)
			}
			for i, raw := range got.e.Entries {
				var e struct{ ID string }
				if err := json.Unmarshal(raw, &e); err != nil {
					t.Fatal(err)
				}
				var a []string
				if i < len(got.e.Announced) {
					for _, w := range got.e.Announced[i] {
						a = append(a, string(w))
					}
				}
				if !slices.EqualFunc(a, tc.want[e.ID], sameValue) {
					t.Errorf("entry %s announced as %.300q, want %.300q", e.ID, a, tc.want[e.ID])
				}
			}
		})
	}
}

// sameValue says whether a and b are the same JSON value.
func sameValue(a, b string) bool {
	var va, vb any
	return json.Unmarshal([]byte(a), &va) == nil && json.Unmarshal([]byte(b), &vb) == nil && reflect.DeepEqual(va, vb)
}

// notes are message_end events of custom messages of one type and
// content, with these counts as details, in this order.
func notes(counts ...int) []string {
	var out []string
	for i, n := range counts {
		out = append(out, fmt.Sprintf(`{"type":"message_end","message":{"role":"custom","customType":"status","content":"live","display":true,"details":{"count":%d},"timestamp":%d}}`, n, 10+i))
	}
	return out
}
