package terminal

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
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

// TestCountIsLinesLength: an item counted before it was ever laid out
// (the first frame of a transcript, and the first after a resize) has
// as many lines as laying it out gives, for every kind of item the
// transcript holds: streamed and finished messages, missing parts, every
// block type, newlines, wide and escaped text, a running tool's long
// result cut to its last lines, notices and markers.
func TestCountIsLinesLength(t *testing.T) {
	long := strings.Repeat("result line\n", MaxToolLines+7)
	build := func() *Transcript {
		tr := &Transcript{}
		tr.AddHistory(HistoryMessage{Role: "assistant", Content: []protocol.Block{
			text("one\ntwo words here\n\nfour " + strings.Repeat("w ", 30)),
			{Type: "thinking", Text: "think 漢字漢字 \x1b[2J " + strings.Repeat("t", 40)},
			{Type: "toolCall", ToolName: "bash", Args: json.RawMessage(`{"command":"` + strings.Repeat("ls ", 20) + `"}`)},
			{Type: "image", MimeType: "image/png"},
			{Type: "widget"},
			{Type: "text", Text: "cut", Truncated: true},
			{Type: "text"},
		}})
		tr.AddHistory(HistoryMessage{Role: "toolResult", Tool: &protocol.Tool{CallID: "c0", Name: "bash", IsError: true}, Content: []protocol.Block{text(long)}})
		tr.AddNotice("a notice " + strings.Repeat("n", 40))
		tr.Mark("a seam " + strings.Repeat("m", 40))
		s := &stream{exec: "x1"}
		apply(tr,
			s.ev(protocol.EventMessageStart, "m1", start("assistant")),
			s.ev(protocol.EventTextDelta, "m1", delta(0, 0, "streaming "+strings.Repeat("s ", 25), false)),
			s.ev(protocol.EventTextDelta, "m1", delta(2, 1, "elided\nstart", false)),
			s.ev(protocol.EventToolStart, "m1", func(e *protocol.Event) {
				e.Tool = &protocol.Tool{CallID: "c1", Name: "bash", Args: json.RawMessage(`{"command":"yes"}`)}
			}),
			s.ev(protocol.EventToolUpdate, "m1", func(e *protocol.Event) {
				e.Tool = &protocol.Tool{CallID: "c1", Name: "bash", Result: json.RawMessage(strconv.Quote(long))}
			}),
			s.ev(protocol.EventMessageEnd, "m2", func(e *protocol.Event) {
				end("assistant", text("part two"))(e)
				e.Part, e.LastPart = protocol.Ordinal(2), false
			}),
		)
		return tr
	}
	for _, width := range []int{0, 1, 2, 5, 9, 30, 200} {
		counted, laid := build(), build()
		for i, it := range counted.items {
			if got, want := it.count(width), len(laid.items[i].lines(width)); got != want {
				t.Errorf("width %d, item %d: counted %d lines, laid out %d: %q", width, i, got, want, laid.items[i].lines(width))
			}
		}
		if got, want := counted.count(width), len(laid.Lines(width)); got != want {
			t.Errorf("width %d: transcript counted %d lines, laid out %d", width, got, want)
		}
	}
}

// TestPrintableASCIIWordAtATime: the eight-bytes-at-a-time test says
// what a byte-by-byte one says, for every byte value at every position
// of a word and of the tail after it, among printable and unprintable
// neighbours. A control byte it let through would reach the terminal
// unescaped (clip's and wrapLine's fast paths trust it).
func TestPrintableASCIIWordAtATime(t *testing.T) {
	slow := func(s string) bool {
		for i := 0; i < len(s); i++ {
			if s[i] < 0x20 || s[i] > 0x7e {
				return false
			}
		}
		return true
	}
	buf := make([]byte, 19)
	for _, fill := range []byte{' ', '~', 'a', 0x1f, 0x7f, 0x80, 0xff} {
		for pos := range buf {
			for b := range 256 {
				for i := range buf {
					buf[i] = fill
				}
				buf[pos] = byte(b)
				for n := pos; n <= len(buf); n++ {
					if s := string(buf[:n]); printableASCII(s) != slow(s) {
						t.Fatalf("printableASCII(%q) = %v", s, !slow(s))
					}
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
