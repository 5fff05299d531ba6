package controller

import (
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/mosaic-agents/mosaic/protocol"
)

// Echo bounds: a refusal or journal entry quotes at most clipLen bytes of
// anything a client sent, and a refusal message is at most maxMessage
// bytes, so a 1 MiB field is never sent back or journaled whole.
const (
	clipLen    = 64
	maxMessage = 512
)

// clip returns s, or its first clipLen bytes (cut on a rune boundary)
// followed by "…" and the total length.
func clip(s string) string { return clipTo(s, clipLen) }

func clipTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", s[:cut], len(s))
}

// quoted is %q of clip(s): the clipped prefix quoted, its length outside.
func quoted(s string) string {
	if len(s) <= clipLen {
		return strconv.Quote(s)
	}
	cut := clipLen
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", strconv.Quote(s[:cut]), len(s))
}

// clipRefusal bounds a refusal's message, whatever built it (a decoder's
// error may quote a field name of any length).
func clipRefusal(r *protocol.Refusal) *protocol.Refusal {
	if len(r.Message) <= maxMessage {
		return r
	}
	c := *r
	c.Message = clipTo(r.Message, maxMessage)
	return &c
}
