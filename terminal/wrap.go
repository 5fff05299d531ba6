package terminal

import "strings"

// wrapLine sanitizes one logical line (LF already split off, or shown as
// ^J) and wraps it to width cells, breaking after the last space that fits
// when there is one. A unit is never split unless it is an escape notation
// wider than the whole width. width <= 0 means no wrapping. An empty line
// gives one empty string.
func wrapLine(s string, width int) []string {
	if printableASCII(s) {
		return wrapASCII(s, width)
	}
	return wrapUnits(s, width)
}

// wrapUnits is wrapLine unit by unit, for any text.
func wrapUnits(s string, width int) []string {
	us := units(s)
	if width <= 0 {
		return []string{join(us)}
	}
	// Split notations wider than the width into single ASCII cells so
	// that every line fits (notations are ASCII).
	var fit []unit
	for _, u := range us {
		if u.esc && u.w > width {
			for i := 0; i < len(u.s); i++ {
				fit = append(fit, unit{u.s[i : i+1], 1, true})
			}
			continue
		}
		fit = append(fit, u)
	}
	var lines []string
	var cur []unit
	w := 0
	for _, u := range fit {
		if w+u.w > width && len(cur) > 0 {
			// Break after the last space of cur, if any (not at 0).
			cut := -1
			for i := len(cur) - 1; i > 0; i-- {
				if cur[i].s == " " {
					cut = i + 1
					break
				}
			}
			if cut < 0 || cut == len(cur) {
				lines = append(lines, join(cur))
				cur, w = nil, 0
			} else {
				lines = append(lines, join(cur[:cut]))
				cur = append([]unit(nil), cur[cut:]...)
				w = 0
				for _, c := range cur {
					w += c.w
				}
			}
		}
		cur = append(cur, u)
		w += u.w
	}
	return append(lines, join(cur))
}

// wrapASCII is wrapLine for printable ASCII, where every byte is one
// cell and nothing needs escaping: the same breaks, found by index, with
// the lines sharing s's bytes instead of being built unit by unit.
func wrapASCII(s string, width int) []string {
	if width <= 0 || len(s) <= width {
		return []string{s}
	}
	lines := make([]string, 0, len(s)/width+2) // a break never comes before width/2 on average
	start := 0
	for len(s)-start > width {
		cut := cutASCII(s, start, width)
		lines = append(lines, s[start:cut])
		start = cut
	}
	return append(lines, s[start:])
}

// cutASCII is where the line of printable ASCII s that starts at start
// ends, when more than width bytes follow start: after the last space of
// the width bytes from start (not at start), or else after all of them.
func cutASCII(s string, start, width int) int {
	end := start + width
	for j := end - 1; j > start; j-- {
		if s[j] == ' ' {
			return j + 1
		}
	}
	return end
}

// clip sanitizes a one-line string (LF shown as ^J) and cuts it to width
// cells, ending with "…" when it was cut. width <= 0 means no cut.
func clip(s string, width int) string {
	if printableASCII(s) { // one cell a byte, nothing to escape
		if width <= 0 || len(s) <= width {
			return s
		}
		return s[:width-1] + "…"
	}
	return clipUnits(s, width)
}

// clipUnits is clip unit by unit, for any text.
func clipUnits(s string, width int) string {
	us := units(s)
	if width <= 0 {
		return join(us)
	}
	w := 0
	for _, u := range us {
		w += u.w
	}
	if w <= width {
		return join(us)
	}
	var b strings.Builder
	w = 0
	for _, u := range us {
		if w+u.w > width-1 {
			break
		}
		b.WriteString(u.s)
		w += u.w
	}
	b.WriteString("…")
	return b.String()
}

// printableASCII says whether s is only printable ASCII (space to ~),
// the common case the clip of every frame meets: already sanitized and
// wrapped lines. It tests eight bytes at a time: a frame's line count
// scans every message of the transcript with it.
func printableASCII(s string) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	i := 0
	for ; i+8 <= len(s); i += 8 {
		x := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		// A byte below 0x20 borrows into its high bit; one above 0x7e
		// has its high bit set, or gets it by the carry of adding 1.
		if ((x-0x20*ones)&^x|(x+ones)|x)&highs != 0 {
			return false
		}
	}
	for ; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
