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

// TestQueueTableNamesFinishedItems: a finished item, which keeps only its
// text's digest, shows that digest cut, not an empty cell.
func TestQueueTableNamesFinishedItems(t *testing.T) {
	var out strings.Builder
	digest := strings.Repeat("ab", 32)
	printQueue(&session{out: &out}, &protocol.Queue{Items: []protocol.QueueItem{{ID: "qi-1", State: protocol.ReceiptAcknowledged, Revision: 1, Digest: digest}}})
	if !strings.Contains(out.String(), "(text not kept; sha256 abababababab…)") {
		t.Fatalf("queue table:\n%s\nwant the finished item's digest, cut", out.String())
	}
}
