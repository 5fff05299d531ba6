package pi

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/engine"
)

// TestEntriesAnnounced: get_entries' answer carries, beside each entry Pi
// announced when it appended it (entry_appended, an extension's
// appendEntry), the entry as announced: Pi keeps the extension's object,
// so the entry it returns later shows the extension's changes since,
// while the file line and the event show it as written. An entry not
// announced, announced on a line framing cut, or over the bound has none.
func TestEntriesAnnounced(t *testing.T) {
	const written = `{"type":"custom","customType":"s","data":{"saves":1},"id":"c1","parentId":"m1","timestamp":"t"}`
	now := map[string]any{"type": "custom", "customType": "s", "data": map[string]any{"saves": 2}, "id": "c1", "parentId": "m1", "timestamp": "t"}
	entry := func(n int) string {
		return `{"type":"custom","customType":"s","data":"` + strings.Repeat("x", n) + `","id":"c1","parentId":"m1","timestamp":"t"}`
	}
	cases := []struct {
		name   string
		events []string
		opts   engine.Options
		want   map[string]string // id -> announced entry ("" none)
	}{
		{name: "announced", events: []string{`{"type":"entry_appended","entry":` + written + `}`}, want: map[string]string{"c1": written, "m1": ""}},
		{name: "not announced", want: map[string]string{"c1": "", "m1": ""}},
		{name: "over the bound", events: []string{`{"type":"entry_appended","entry":` + entry(maxAnnouncedEntry) + `}`}, want: map[string]string{"c1": "", "m1": ""}},
		{name: "cut by framing", events: []string{`{"type":"entry_appended","entry":` + entry(8000) + `}`}, opts: engine.Options{MaxLine: 4096, LineLimit: 1 << 20}, want: map[string]string{"c1": "", "m1": ""}},
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
				map[string]any{"type": "message", "id": "m1", "parentId": nil, "message": map[string]any{"role": "user", "content": "hi"}},
				now,
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
				var a string
				if i < len(got.e.Announced) {
					a = string(got.e.Announced[i])
				}
				if a != tc.want[e.ID] {
					t.Errorf("entry %s announced as %.80q, want %.80q", e.ID, a, tc.want[e.ID])
				}
			}
		})
	}
}
