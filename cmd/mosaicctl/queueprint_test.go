package main

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mosaic-agents/mosaic/protocol"
)

// TestQueueTableCutsWholeCharacters: `queue ID` shortens a long waiting
// text to 72 bytes for its table; the cut falls between characters, so a
// text in any script shows as text followed by "…", never as the byte
// notation of a half character.
func TestQueueTableCutsWholeCharacters(t *testing.T) {
	for _, text := range []string{strings.Repeat("é", 80), "a" + strings.Repeat("日本", 40), strings.Repeat("x", 71) + "😀😀"} {
		var out bytes.Buffer
		printQueue(&session{out: &out}, &protocol.Queue{Items: []protocol.QueueItem{{ID: "qi-0123456789abcdef", State: "queued", Revision: 1, Text: text}}})
		line := strings.Split(out.String(), "\n")[1]
		cell := line[strings.LastIndex(line, "  ")+2:]
		if !utf8.ValidString(cell) || !strings.HasSuffix(cell, "…") || !strings.HasPrefix(text, strings.TrimSuffix(cell, "…")) {
			t.Errorf("queue table cell %q for a %d-byte text; want a prefix of the text cut between characters, then …", cell, len(text))
		}
	}
}
