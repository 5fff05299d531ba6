package stubmodel

import (
	"strings"
	"testing"
)

// TestBulkChunks: a Bulk turn streams its Text, then exactly
// BulkText(Bulk) in pieces of at most BulkChunk, made of numbered lines.
func TestBulkChunks(t *testing.T) {
	const n = 600<<10 + 17
	chunks := Turn{Text: []string{"head "}, Bulk: n}.Chunks()
	if got := strings.Join(chunks, ""); got != "head "+BulkText(n) || len(BulkText(n)) != n {
		t.Fatalf("chunks join to %d bytes, want %d", len(got), 5+n)
	}
	for i, c := range chunks[1:] {
		if len(c) > BulkChunk {
			t.Fatalf("chunk %d holds %d bytes", i, len(c))
		}
	}
	if l := strings.SplitN(BulkText(200), "\n", 2)[0]; l != "00000001 bulk "+strings.Repeat("0", 48)+"1" {
		t.Fatalf("first line %q", l)
	}
}
