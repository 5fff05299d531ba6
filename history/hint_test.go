package history

import (
	"fmt"
	"strings"
	"testing"
)

// TestHints pins what the light scan learns of a line's parts: the common
// lines are counted without decoding, and each line the scan cannot
// judge exactly is left to the decode. lightAgrees holds every promise
// to the decoded entry.
func TestHints(t *testing.T) {
	blocks := func(n int) string {
		return "[" + strings.TrimSuffix(strings.Repeat(`{"type":"text","text":"b"},`, n), ",") + "]"
	}
	line := func(message string) string {
		return `{"type":"message","id":"a","parentId":null,"message":` + message + `}`
	}
	long := func(n int, fill string) string {
		return line(`{"role":"user","content":"` + strings.Repeat(fill, n/len(fill)) + `"}`)
	}
	for _, tc := range []struct {
		name, line string
		want       partHint
	}{
		{"user", msg(t, "a", "", "user", "hi"), hintOne},
		{"assistant with tool call", line(`{"role":"assistant","content":[{"type":"text","text":"x"},{"type":"toolCall","id":"c","name":"bash","arguments":{"command":"ls"}}]}`), hintOne},
		{"string content", line(`{"role":"toolResult","content":"x"}`), hintOne},
		{"no content", line(`{"role":"assistant"}`), hintOne},
		{"unknown role", line(`{"role":"system","content":"x"}`), hintOne},
		{"role not a string", line(`{"role":7,"content":"x"}`), hintOne},
		{"message not an object", line(`"x"`), hintOne},
		{"empty message", line(`{}`), hintOne},
		{"no message", `{"type":"message","id":"a"}`, hintOne},
		{"folded keys", line(`{"Role":"user","CONTENT":"x"}`), hintOne},
		{"blocks that do not decode", line(`{"role":"user","content":[1,"x",null]}`), hintOne},
		{"64 blocks", line(`{"role":"user","content":` + blocks(64) + `}`), hintOne},
		{"65 blocks", line(`{"role":"user","content":` + blocks(65) + `}`), hintUnknown},
		{"custom role", line(`{"role":"custom","display":true,"content":"x"}`), hintUnknown},
		{"hidden custom role", line(`{"role":"custom","display":false,"content":"x"}`), hintUnknown},
		{"escaped role", line(`{"role":"cust\u006fm","content":"x"}`), hintUnknown},
		{"two roles", line(`{"role":"user","Role":"custom"}`), hintUnknown},
		{"two contents", line(`{"role":"user","content":"x","Content":` + blocks(65) + `}`), hintUnknown},
		{"two messages", `{"type":"message","id":"a","message":{"role":"user"},"Message":{"role":"custom"}}`, hintUnknown},
		{"non-ASCII key", `{"type":"message","id":"a","meſſage":{"role":"custom"},"message":{"role":"user"}}`, hintUnknown},
		{"non-ASCII key in the message", line(`{"role":"user","conténu":1}`), hintUnknown},
		{"compaction", ent(t, "compaction", "a", "", map[string]any{"summary": "s"}), hintOne},
		{"bad summary", ent(t, "branch_summary", "a", "", map[string]any{"summary": 3}), hintOne},
		{"unknown type", ent(t, "future", "a", "", nil), hintOne},
		{"custom message", ent(t, "custom_message", "a", "", map[string]any{"display": true, "content": "x"}), hintUnknown},
		{"state", ent(t, "model_change", "a", "", map[string]any{"provider": "p"}), hintNone},
		{"64 KiB of invalid UTF-8", long(hintBytes-100, "\xff"), hintOne},
		{"128 KiB of escaped characters", long(hintValidBytes-100, "<"), hintOne},
		{"128 KiB with invalid UTF-8", long(hintValidBytes-100, "\xffx"), hintUnknown},
		{"longer", long(hintValidBytes+1, "x"), hintUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := []byte(strings.TrimSuffix(tc.line, "\n"))
			env, ok := light(b, "a")
			if !ok {
				t.Fatalf("light did not take %.200q", b)
			}
			if env.hint != tc.want {
				t.Fatalf("hint %d, want %d", env.hint, tc.want)
			}
			lightAgrees(t, b)
		})
	}
}

// TestHintedSessionPages reads a session whose entries are counted from
// their hints and pages it forward and back, against the reader without
// the light scan.
func TestHintedSessionPages(t *testing.T) {
	seventy := make([]any, 70)
	for i := range seventy {
		seventy[i] = map[string]any{"type": "text", "text": "x"}
	}
	lines := []string{hdr}
	parent := ""
	for i := range 700 {
		id := fmt.Sprintf("e%d", i)
		switch i % 7 {
		case 0:
			lines = append(lines, ent(t, "model_change", id, parent, map[string]any{"provider": "p"}))
		case 3:
			lines = append(lines, ent(t, "message", id, parent, map[string]any{"message": map[string]any{
				"role": "custom", "display": i%2 == 0, "content": "c"}}))
		case 5:
			lines = append(lines, ent(t, "message", id, parent, map[string]any{"message": map[string]any{
				"role": "assistant", "content": seventy}}))
		default:
			lines = append(lines, msg(t, id, parent, "user", id))
		}
		parent = id
	}
	f := newFixture(t)
	f.write(t, strings.Join(lines, ""))
	s := f.mustRead(t)
	sameServed(t, "the hinted read", serve(t, s), serve(t, fullDecode(t, f.path)))
	n, err := s.Count("")
	if err != nil {
		t.Fatal(err)
	}
	for end := n; end > 0; {
		p, err := s.Before("", end)
		if err != nil {
			t.Fatal(err)
		}
		fwd, err := s.Page("", p.From)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(fwd.Parts[:len(p.Parts)]) != fmt.Sprint(p.Parts) {
			t.Fatalf("the page before %d differs from the forward page from %d", end, p.From)
		}
		end = p.From
	}
}
