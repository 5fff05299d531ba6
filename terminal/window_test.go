package terminal

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/protocol"
)

// TestWindowIsLinesSlice: the viewport a frame takes (count, window) is
// exactly the matching slice of Lines, for every start and length, across
// items of different heights and hidden tool items.
func TestWindowIsLinesSlice(t *testing.T) {
	tr := &Transcript{}
	for i := range 12 {
		tr.AddHistory(HistoryMessage{Role: "assistant", Content: []protocol.Block{text(fmt.Sprintf("m%d %s", i, strings.Repeat("w ", i*7)))}})
	}
	for _, width := range []int{0, 9, 30} {
		all := tr.Lines(width)
		if got := tr.count(width); got != len(all) {
			t.Fatalf("width %d: count %d, Lines %d", width, got, len(all))
		}
		for from := 0; from <= len(all)+1; from++ {
			for n := 0; n <= len(all)-from+2; n++ {
				want := all[min(from, len(all)):min(from+n, len(all))]
				got := tr.window(nil, width, from, n)
				if len(want) == 0 && len(got) == 0 {
					continue
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("width %d, window(%d, %d) = %q, want %q", width, from, n, got, want)
				}
			}
		}
	}
}

// TestClipFastPathSameAsSlow: the printable-ASCII shortcut of clip gives
// what the unit-by-unit path gives.
func TestClipFastPathSameAsSlow(t *testing.T) {
	for _, s := range []string{"", "a", "hello world", strings.Repeat("x", 50)} {
		for _, width := range []int{0, 1, 2, 5, 11, 50, 60} {
			if got, want := clip(s, width), clipUnits(s, width); got != want {
				t.Fatalf("clip(%q, %d) = %q, want %q", s, width, got, want)
			}
		}
	}
}

// TestWrapASCIISameAsUnits: the printable-ASCII path of wrapLine breaks
// exactly where the unit-by-unit path does.
func TestWrapASCIISameAsUnits(t *testing.T) {
	words := []string{"a", "bb", "ccc", " ", "  ", "dddddddddddd", "e-f", "x"}
	seed := uint32(7)
	for n := range 3000 {
		var b strings.Builder
		for range n % 23 {
			seed = seed*1664525 + 1013904223
			b.WriteString(words[seed>>29])
		}
		s := b.String()
		for _, width := range []int{0, 1, 2, 3, 5, 8, 13} {
			if got, want := wrapLine(s, width), wrapUnits(s, width); !reflect.DeepEqual(got, want) {
				t.Fatalf("wrapLine(%q, %d) = %q, want %q", s, width, got, want)
			}
		}
	}
}
