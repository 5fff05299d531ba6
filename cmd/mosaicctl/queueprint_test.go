package main

import (
	"bytes"
	"encoding/json"
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
// text's digest, says where its text went, not an empty cell nor a hash:
// a sent one that the transcript holds it.
func TestQueueTableNamesFinishedItems(t *testing.T) {
	digest := strings.Repeat("ab", 32)
	for _, tc := range []struct{ state, want string }{
		{protocol.ReceiptAcknowledged, "(sent: its text is in the transcript, `mosaicctl history`)"},
		{protocol.ReceiptDeliveryUnknown, "(finished: its text is not kept; --json shows its sha256)"},
	} {
		var out strings.Builder
		printQueue(&session{out: &out}, &protocol.Queue{Items: []protocol.QueueItem{{ID: "qi-1", State: tc.state, Revision: 1, Digest: digest}}})
		if !strings.Contains(out.String(), tc.want) {
			t.Errorf("queue table:\n%s\nwant the %s item shown as %q", out.String(), tc.state, tc.want)
		}
	}
}

// TestQueueResumeSaysNotPaused: the reply to a resume of a queue that was
// not paused says so (notPaused), and `queue resume` prints it first in
// plain words; a reply that lifted a pause, and a listing, do not.
func TestQueueResumeSaysNotPaused(t *testing.T) {
	for _, tc := range []struct {
		line string
		want bool
	}{
		{`{"record":"queue","request":"r-1","revision":3,"paused":false,"items":[],"notPaused":true}`, true},
		{`{"record":"queue","request":"r-1","revision":3,"paused":false,"items":[]}`, false},
	} {
		var q protocol.Queue
		if err := json.Unmarshal([]byte(tc.line), &q); err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		printQueue(&session{out: &out}, &q)
		if got := strings.HasPrefix(out.String(), "not paused: nothing to resume"); got != tc.want {
			t.Errorf("reply %s printed:\n%s\nwant the not-paused line: %v", tc.line, out.String(), tc.want)
		}
	}
}
