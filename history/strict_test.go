package history

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/protocol"
)

// hostileArgs are tool call arguments an engine can write that
// encoding/json reads without complaint but the protocol's strict
// decoding refuses once they sit in a page record: an integer a model
// wrote as 1e20 and JSON.stringify spelled out, a lone surrogate, a
// duplicate key, invalid UTF-8, nesting past 64 levels, and nesting
// that with the page's own levels passes encoding/json's 10000.
func hostileArgs() map[string]string {
	nest := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	m := map[string]string{
		"unsafe integer":    `{"n":100000000000000000000}`,
		"lone surrogate":    `{"s":"\ud800"}`,
		"duplicate key":     `{"a":1,"a":2}`,
		"invalid UTF-8":     "{\"s\":\"\xff\"}",
		"nesting 9996 deep": nest(9996),
	}
	for n := 50; n <= 70; n++ {
		m[fmt.Sprintf("nesting %d deep", n)] = nest(n)
	}
	return m
}

// checkRecord puts page into an observed record as the controller does
// (protocol.LineWith) and fails unless the line is the one protocol.Line
// writes and passes the strict decoding a client applies to it.
func checkRecord(t *testing.T, page any) {
	t.Helper()
	raw, err := protocol.Marshal(page)
	if err != nil {
		t.Fatal(err)
	}
	obs := protocol.Observed{Record: protocol.RecordObserved, Request: "o-1"}
	got, err := protocol.LineWith(&obs, &obs.History, raw)
	if err != nil {
		t.Fatalf("LineWith: %v", err)
	}
	want, err := protocol.Line(obs)
	if err != nil || string(got) != string(want) {
		t.Fatalf("LineWith wrote %d bytes, Line %d bytes and %v", len(got), len(want), err)
	}
	if err := protocol.Validate(got[:len(got)-1]); err != nil {
		t.Fatalf("a client refuses the record: %v", err)
	}
}

// TestPagesDecodeStrictly: whatever arguments a tool call in a session
// or a Claude transcript holds, the record carrying its page is one a
// client's strict decoding accepts (docs/protocol.md, "Framing and
// decoding"), and the same through LineWith as through Line; arguments
// it would refuse are carried as their JSON text, as arguments too large
// for a fragment are.
func TestPagesDecodeStrictly(t *testing.T) {
	for name, args := range hostileArgs() {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			line := `{"type":"message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"bash","arguments":` + args + `}]}}` + "\n"
			f.write(t, hdr+line)
			p, err := f.mustRead(t).Page("", 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Parts) != 1 || len(p.Parts[0].Blocks) == 0 {
				t.Fatalf("the tool call is not on the page: %+v", p.Parts)
			}
			c := p.Parts[0].Blocks[0].Content
			if c.Type != "toolCall" || c.ToolCallID != "c1" || (c.Args == nil) == (c.Text == "") {
				t.Fatalf("the tool call lost its identity or its arguments: %+v", c)
			}
			// 58 levels of arguments, below the page record's seven,
			// reach the bound of 64 exactly: they stay arguments.
			var n int
			if _, err := fmt.Sscanf(name, "nesting %d deep", &n); err == nil && n <= 58 && c.Args == nil {
				t.Fatalf("arguments %d levels deep, within the bound, became text", n)
			}
			checkRecord(t, p)

			m := Message{ID: "u1", Role: "assistant", Blocks: []protocol.Block{{Type: "toolCall", ToolCallID: "c1", ToolName: "Bash", Args: json.RawMessage(args)}}}
			parts := Cut(m)
			if len(parts) != CutCount(m) {
				t.Fatalf("Cut made %d parts, CutCount counts %d", len(parts), CutCount(m))
			}
			checkRecord(t, Page{Session: "s", Parts: parts})
		})
	}
}
