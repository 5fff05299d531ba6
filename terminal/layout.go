package terminal

import "strings"

// layout receives an item's lines as the item lays them out, keeping
// them (lines) or only counting them (count). A frame needs the length of
// the whole transcript, for its scroll position, but the lines of its
// viewport only: counting a message wraps no string and allocates
// nothing, so the first frame of a long transcript, and the first after
// a resize, cost a scan of its text instead of a copy of all of it.
type layout struct {
	width int
	keep  bool
	out   []string // the lines, when keep
	n     int      // how many lines were laid out
}

// line lays out one line, cut to the width.
func (l *layout) line(s string) {
	l.n++
	if l.keep {
		l.out = append(l.out, clip(s, l.width))
	}
}

// body lays out s wrapped under prefix (body).
func (l *layout) body(prefix, s string) {
	if !l.keep {
		l.n += bodyCount(prefix, s, l.width)
		return
	}
	ls := body(prefix, s, l.width)
	l.out = append(l.out, ls...)
	l.n += len(ls)
}

// bodyTail is body keeping only the last max lines, after a line from
// note saying how many were left out.
func (l *layout) bodyTail(prefix, s string, max int, note func(left int) string) {
	if !l.keep {
		n := bodyCount(prefix, s, l.width)
		if n > max {
			n = max + 1
		}
		l.n += n
		return
	}
	ls := body(prefix, s, l.width)
	if left := len(ls) - max; left > 0 {
		l.line(note(left))
		ls = ls[left:]
	}
	l.out = append(l.out, ls...)
	l.n += len(ls)
}

// bodyCount is len(body(prefix, s, width)) without building the lines.
func bodyCount(prefix, s string, width int) int {
	in := inner(width, Width(prefix))
	if printableASCII(s) { // so no LF either: the common case
		return asciiCount(s, in)
	}
	n := 0
	for l := range strings.SplitSeq(s, "\n") {
		if printableASCII(l) {
			n += asciiCount(l, in)
		} else {
			n += len(wrapUnits(l, in))
		}
	}
	return n
}

// asciiCount is len(wrapASCII(s, width)).
func asciiCount(s string, width int) int {
	if width <= 0 {
		return 1
	}
	n := 1
	for start := 0; len(s)-start > width; n++ {
		start = cutASCII(s, start, width)
	}
	return n
}
