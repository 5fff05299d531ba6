package terminal

import (
	"fmt"
	"strings"
	"testing"
)

// TestLegendAndStatusReadWhole: with the ? legend showing and a full
// status line (a draft kept, the replay window known), every key of the
// legend and the status line's draft hint read whole at 80 and 100
// columns: the legend takes the rows it needs from the transcript, the
// status line leaves out whole parts (the replay window first, at 80 the
// generation too) instead of cutting the hint.
func TestLegendAndStatusReadWhole(t *testing.T) {
	for _, tc := range []struct {
		width int
		want  []string // the frame's rows under the transcript
	}{
		{80, []string{
			"pi-0123456789abcdef0123 | controller | binding active | draft kept (Ctrl-Y)",
			"keys: ^T take control, ^Y restore draft, ^G interrupt, ^X stop, ^R recover,",
			"^J newline, ^O reconnect, PgUp/PgDn, ↑/↓ queued items, ^P resume queue, ^C quit",
			"> ",
		}},
		{100, []string{
			"pi-0123456789abcdef0123 | controller | gen 12 | engine idle | binding active | draft kept (Ctrl-Y)",
			"keys: ^T take control, ^Y restore draft, ^G interrupt, ^X stop, ^R recover, ^J newline,",
			"^O reconnect, PgUp/PgDn, ↑/↓ queued items, ^P resume queue, ^C quit",
			"> ",
		}},
	} {
		t.Run(fmt.Sprint(tc.width, " columns"), func(t *testing.T) {
			r := &screenRig{}
			r.s.Transcript = notices(30)
			r.s.SetControl(Control{"other", 11}, false)
			r.feed("kept for later")
			r.s.SetControl(Control{"me", 12}, true) // keeps the text as the draft
			r.s.Status = Status{Conversation: "pi-0123456789abcdef0123", Controller: true, Generation: 12,
				Engine: "idle", Binding: "active", Replay: "seq 1-4107"}
			r.feed("?")
			const h = 24
			f := r.s.Render(tc.width, h)
			checkFrame(t, f, tc.width, h)
			got := f.Lines[h-len(tc.want):]
			for i := range tc.want {
				if got[i] != tc.want[i] {
					t.Errorf("row %d:\n got %q\nwant %q", h-len(tc.want)+i, got[i], tc.want[i])
				}
			}
			if f.StatusRow != h-len(tc.want) {
				t.Errorf("status row %d, want %d", f.StatusRow, h-len(tc.want))
			}
			if f.Lines[f.StatusRow-1] != "-- n29 --" {
				t.Errorf("the row over the status line is %q, want the transcript's end", f.Lines[f.StatusRow-1])
			}
			for _, l := range f.Lines {
				if strings.Contains(l, "…") {
					t.Errorf("row %q is cut", l)
				}
			}
			for _, key := range strings.Split(strings.TrimPrefix(Legend, "keys: "), ", ") {
				if !strings.Contains(f.Plain(), key) {
					t.Errorf("the frame does not show the key %q whole", key)
				}
			}
		})
	}
}

// TestLegendLines: the legend breaks only between keys, at any width its
// widest key fits.
func TestLegendLines(t *testing.T) {
	for _, width := range []int{30, 40, 60, 80, 100, 200} {
		t.Run(fmt.Sprint(width), func(t *testing.T) {
			lines := legendLines(width)
			for _, l := range lines {
				if Width(l) > width || strings.Contains(l, "…") {
					t.Errorf("line %q is wider than %d or cut", l, width)
				}
			}
			if got := strings.Join(lines, " "); got != Legend {
				t.Errorf("the lines join to %q, want the legend", got)
			}
		})
	}
	if lines := legendLines(10); !strings.HasSuffix(lines[0], "…") || Width(lines[0]) > 10 {
		t.Errorf("a key wider than the screen: %q, want it cut to the width", lines[0])
	}
}

// TestStatusLineLeavesOutWholeParts: a status line too wide for the
// screen leaves out whole parts, the least needed first, then cuts the
// binding's reason, and keeps the draft hint whole.
func TestStatusLineLeavesOutWholeParts(t *testing.T) {
	full := Status{Conversation: "pi-0123456789abcdef0123", Controller: true, Generation: 12,
		Engine: "idle", Binding: "active", Replay: "seq 1-4107", Draft: true}
	stopped := full
	stopped.Binding = "stopped (admission closed: stopped with a proof by force-stop s-0123456789abcdef; recover starts it again)"
	for _, tc := range []struct {
		name  string
		s     Status
		width int
		want  string
	}{
		{"all fits at 120", full, 120,
			"pi-0123456789abcdef0123 | controller | gen 12 | engine idle | binding active | replay seq 1-4107 | draft kept (Ctrl-Y)"},
		{"the replay window leaves at 100", full, 100,
			"pi-0123456789abcdef0123 | controller | gen 12 | engine idle | binding active | draft kept (Ctrl-Y)"},
		{"the engine state and the generation leave at 80", full, 80,
			"pi-0123456789abcdef0123 | controller | binding active | draft kept (Ctrl-Y)"},
		{"a long binding is cut at 100", stopped, 100,
			"pi-0123456789abcdef0123 | controller | binding stopped (admission closed: sto… | draft kept (Ctrl-Y)"},
		{"unbounded", stopped, 0,
			"pi-0123456789abcdef0123 | controller | gen 12 | engine idle | binding " + stopped.Binding + " | replay seq 1-4107 | draft kept (Ctrl-Y)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.s.Line(tc.width)
			if got != tc.want {
				t.Fatalf("Line(%d)\n got %q\nwant %q", tc.width, got, tc.want)
			}
			if tc.width > 0 && Width(got) > tc.width {
				t.Fatalf("Line(%d) is %d cells wide", tc.width, Width(got))
			}
		})
	}
}
