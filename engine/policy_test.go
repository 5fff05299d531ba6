package engine

import (
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/protocol"
)

// TestCheckTextMessage: the text-policy refusal keeps its code and tells
// the user what to send instead, built from their own command, and names
// no file of the engine's package (the table's Source is for the docs).
func TestCheckTextMessage(t *testing.T) {
	for _, tc := range []struct {
		name, text, want string
	}{
		{"a command", "/help", `"explain /help" or "'/help'"`},
		{"a command with arguments", "/goal ship it", `"explain /goal" or "'/goal'"`},
		{"after white space", " \t/goal x", `"explain /goal" or "'/goal'"`},
		{"after a zero-width space", "\u200b/skill:x y", `"explain /skill:x" or "'/skill:x'"`},
		{"a long word, cut", "/" + strings.Repeat("a", 40), `"explain /` + strings.Repeat("a", 23) + `"`},
		{"a slash alone", "/", `"explain /" or "'/'"`},
		{"a control character inside", "/a\x1bb", `"explain /a\x1bb"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckText(tc.text)
			if protocol.CodeOf(err) != protocol.CodeTextPolicy {
				t.Fatalf("CheckText(%q): %v; want text-policy", tc.text, err)
			}
			msg := err.(*protocol.Refusal).Message
			if !strings.Contains(msg, "put a word or a quote before the slash") || !strings.Contains(msg, tc.want) {
				t.Errorf("message %q: want the fix with %s", msg, tc.want)
			}
			if strings.Contains(msg, ".js") || strings.Contains(msg, "dist/") {
				t.Errorf("message %q names a file of the engine's package", msg)
			}
		})
	}
}
