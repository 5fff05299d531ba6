package audit

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mosaic-agents/mosaic/internal/inert"
)

// Bounds on what one entry may carry, in bytes. Peer text reaches entries
// through messages and fields (a client name, a refusal that quotes a
// record type); a bound keeps a prefix of it, never the whole.
const (
	// MaxField bounds every MOSAIC_ field but the proof.
	MaxField = 512
	// MaxMessage bounds MESSAGE, the human line.
	MaxMessage = 1024
	// MaxProof bounds MOSAIC_PROOF, the canonical JSON of a proof the
	// controller recorded (not peer text). A larger proof is left out,
	// its digest kept; the claim store holds it whole.
	MaxProof = 1 << 20
)

// bound returns s if it fits in max bytes, else its longest prefix that
// ends on a rune boundary and, with a note of how much was cut, fits.
func bound(s string, max int) string {
	if len(s) <= max {
		return s
	}
	note := "…[cut from " + strconv.Itoa(len(s)) + " bytes]"
	cut := max - len(note)
	if cut < 0 { // no room to say so: the prefix alone
		cut, note = max, ""
	}
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + note
}

// validName reports whether k, prefixed with MOSAIC_, is a field name
// journald accepts: upper-case letters, digits and underscores.
func validName(k string) bool {
	if k == "" || len(k) > 64-len("MOSAIC_") {
		return false
	}
	for _, r := range k {
		if !(r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return true
}

// OneLine returns s with every character of inert.Table escaped, as \n,
// \t, \r or \u{XXXX}, and every byte that is not UTF-8 as \xXX:
// controls (a newline and NUL among them), the line separators, bidi
// controls, invisible and tag characters. It is the journal's notation of
// engine and peer text: MESSAGE here, and each engine stderr line the
// controller forwards to its own stderr (controller/stderr.go), which
// journald's stream reader splits at LF and at NUL alike. Unescaped, such
// text holds lines that `journalctl -o cat` and line-based readers show as
// entries of their own, the controller's to all appearances, or reorders
// or hides the words around it; a lone byte such as 0x9B is an escape
// sequence's start to a terminal that reads 8-bit controls.
func OneLine(s string) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, inert.Escaped) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02X`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case inert.Escaped(r):
			fmt.Fprintf(&b, `\u{%04X}`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}
