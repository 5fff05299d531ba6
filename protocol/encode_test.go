package protocol

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestLineKeepsHTMLCharacters: <, > and & pass as they are, in strings and
// in raw values (json.Marshal escapes both); U+2028 stays escaped, and the
// record is one line.
func TestLineKeepsHTMLCharacters(t *testing.T) {
	ev := Event{Record: RecordEvent, Kind: EventToolStart, Text: "a<b>&c\u2028",
		Tool: &Tool{CallID: "c", Args: json.RawMessage(`{"command": "ls 2>&1 < in"}`)}}
	line, err := Line(ev)
	if err != nil {
		t.Fatal(err)
	}
	s := string(line)
	if !strings.HasSuffix(s, "}\n") || strings.Count(s, "\n") != 1 {
		t.Fatalf("not one line: %q", s)
	}
	for _, want := range []string{`"text":"a<b>&c\u2028"`, `"args":{"command":"ls 2>&1 < in"}`} {
		if !strings.Contains(s, want) {
			t.Fatalf("line %s lacks %s", s, want)
		}
	}
	m, err := Marshal(ev)
	if err != nil || string(m) != strings.TrimSuffix(s, "\n") {
		t.Fatalf("Marshal = %q, %v; want the line without its LF", m, err)
	}
	var back Event
	if err := json.Unmarshal(line, &back); err != nil || back.Text != ev.Text {
		t.Fatalf("round trip: %v, %q", err, back.Text)
	}
}
