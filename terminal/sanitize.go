package terminal

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mosaic-agents/mosaic/internal/inert"
)

// Escape returns the visible notation of r and true when r is in
// inert.Table, or "" and false when r is shown as itself: a C0 control or
// DEL in caret notation (^@ … ^_, ^?), anything else as <U+XXXX>. LF is
// escaped too (^J), except where a body is laid out by SanitizeBody or the
// renderer, which turns it into a line break. Invalid UTF-8 bytes are not
// characters and are shown as <0xFF> (see InvalidByte).
func Escape(r rune) (string, bool) {
	switch inert.Of(r) {
	case inert.Verbatim:
		return "", false
	case inert.DEL:
		return "^?", true
	case inert.C0:
		return "^" + string(r+0x40), true
	}
	return fmt.Sprintf("<U+%04X>", r), true
}

// InvalidByte is the notation of a byte that is not part of valid UTF-8.
func InvalidByte(b byte) string { return fmt.Sprintf("<0x%02X>", b) }

// unit is one thing the renderer lays out: a visible character with any
// zero-width characters that follow it, or an escape notation. Wrapping
// never splits a unit.
type unit struct {
	s   string
	w   int
	esc bool
}

// units sanitizes s into units. LF is escaped like every other C0
// control; callers that lay out bodies split at LF first.
func units(s string) []unit {
	var out []unit
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			out = append(out, unit{InvalidByte(s[i]), 6, true})
			i++
			continue
		}
		i += n
		if esc, ok := Escape(r); ok {
			out = append(out, unit{esc, len(esc), true})
			continue
		}
		w := runeWidth(r)
		if w == 0 && len(out) > 0 && !out[len(out)-1].esc {
			out[len(out)-1].s += string(r)
			continue
		}
		out = append(out, unit{string(r), w, false})
	}
	return out
}

func join(us []unit) string {
	var b strings.Builder
	for _, u := range us {
		b.WriteString(u.s)
	}
	return b.String()
}

// SanitizeLine returns s made inert for one line of the header, status,
// a notice or a dialog: every character of inert.Table, LF included (^J), and
// every invalid byte is shown in its notation.
func SanitizeLine(s string) string { return join(units(s)) }

// SanitizeBody returns s made inert for a message body: LF is laid out as
// a line break (one string per line), everything else of inert.Table (CR as
// ^M, TAB as ^I, ESC as ^[) and every invalid byte is shown in its
// notation.
func SanitizeBody(s string) []string {
	parts := strings.Split(s, "\n")
	for i, p := range parts {
		parts[i] = SanitizeLine(p)
	}
	return parts
}

// Width returns the number of terminal cells a sanitized string takes,
// with the same approximation the renderer uses to wrap.
func Width(s string) int {
	if printableASCII(s) {
		return len(s)
	}
	w := 0
	for _, r := range s {
		w += runeWidth(r)
	}
	return w
}

// runeWidth approximates the cells a printable rune takes: zero for
// combining marks and format characters (ZWJ, ZWNJ, variation selectors),
// two for East Asian wide and fullwidth characters and the common emoji
// blocks, one otherwise. Terminals disagree on some of these; the screen
// loop clips lines anyway.
func runeWidth(r rune) int {
	switch {
	case r == 0:
		return 0
	case unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf):
		return 0
	case r >= 0xFE00 && r <= 0xFE0F, r >= 0xE0100 && r <= 0xE01EF:
		return 0
	}
	for _, w := range wide {
		if r >= w[0] && r <= w[1] {
			return 2
		}
	}
	return 1
}

var wide = [][2]rune{
	{0x1100, 0x115F}, {0x231A, 0x231B}, {0x2329, 0x232A}, {0x23E9, 0x23EC},
	{0x23F0, 0x23F0}, {0x23F3, 0x23F3}, {0x25FD, 0x25FE}, {0x2614, 0x2615},
	{0x2648, 0x2653}, {0x267F, 0x267F}, {0x2693, 0x2693}, {0x26A1, 0x26A1},
	{0x26AA, 0x26AB}, {0x26BD, 0x26BE}, {0x26C4, 0x26C5}, {0x26CE, 0x26CE},
	{0x26D4, 0x26D4}, {0x26EA, 0x26EA}, {0x26F2, 0x26F5}, {0x26FA, 0x26FD},
	{0x2705, 0x2705}, {0x270A, 0x270B}, {0x2728, 0x2728}, {0x274C, 0x274C},
	{0x2753, 0x2755}, {0x2757, 0x2757}, {0x2795, 0x2797}, {0x27B0, 0x27B0},
	{0x27BF, 0x27BF}, {0x2B1B, 0x2B1C}, {0x2B50, 0x2B50}, {0x2B55, 0x2B55},
	{0x2E80, 0x303E}, {0x3041, 0x33FF}, {0x3400, 0x4DBF}, {0x4E00, 0x9FFF},
	{0xA000, 0xA4CF}, {0xA960, 0xA97F}, {0xAC00, 0xD7A3}, {0xF900, 0xFAFF},
	{0xFE10, 0xFE19}, {0xFE30, 0xFE6F}, {0xFF00, 0xFF60}, {0xFFE0, 0xFFE6},
	{0x16FE0, 0x16FE4}, {0x17000, 0x18AFF}, {0x1B000, 0x1B2FF},
	{0x1F004, 0x1F004}, {0x1F0CF, 0x1F0CF}, {0x1F18E, 0x1F18E},
	{0x1F191, 0x1F19A}, {0x1F200, 0x1F251}, {0x1F300, 0x1F64F},
	{0x1F680, 0x1F6FF}, {0x1F7E0, 0x1F7EB}, {0x1F90C, 0x1F9FF},
	{0x1FA70, 0x1FAFF}, {0x20000, 0x2FFFD}, {0x30000, 0x3FFFD},
}
