package web

import (
	"fmt"
	"unicode/utf8"

	"github.com/mosaic-agents/mosaic/terminal"
)

// maxRecordLine bounds a record line's engine text as the page gets it.
// An extension's status or widget update is a notice of up to the
// engine's line (1 MiB, more once made inert), sent as often as the
// engine likes: the tab keeps maxOutbox records and the page 200, so an
// unbounded line would let the engine hold hundreds of MiB per tab on
// the server and in the browser. Attach's notice row shows one screen
// row of it.
const maxRecordLine = 4 << 10

// recordLine makes s inert (terminal.SanitizeLine) and returns it, or its
// first maxRecordLine bytes cut on a rune boundary and the count of the
// rest: clipped after, so the escapes it adds count against the bound.
func recordLine(s string) string {
	line := terminal.SanitizeLine(s)
	if len(line) <= maxRecordLine {
		return line
	}
	cut := maxRecordLine
	for cut > 0 && !utf8.RuneStart(line[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d more bytes not shown)", line[:cut], len(line)-cut)
}
