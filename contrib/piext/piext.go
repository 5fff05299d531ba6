// Package piext holds mosaic's reviewed fixture extensions for the pinned
// Pi (docs/security.md) and what the tests that pin them expect to see.
package piext

import _ "embed"

// Gate is gate.ts, for a test to write where the engine reads it and pin
// with `conv add --extension`.
//
//go:embed gate.ts
var Gate []byte

// GateTitle is the title gate.ts gives its confirm and select: markup,
// Markdown, a link, ANSI, bidi overrides and line breaks.
const GateTitle = "Allow <b>rm -rf</b> **now**? [x](http://127.0.0.1/) \u001b[31mRED\u001b[0m RLO:\u202eevil.exe\u202c\nline2 \u2028 <script>x</script>"

// GateLabels are the labels of gate.ts's select, in order; it lets the
// command run only for the first.
var GateLabels = []string{"Allow <i>once</i>", "**Block**", "\u202egnp.exe\u202c (RLO label)", "multi\nline", "\u001b[1mbold\u001b[0m"}
