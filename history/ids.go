package history

import (
	"crypto/sha1"
	"encoding/hex"
	"unicode/utf8"

	"github.com/mosaic-agents/mosaic/internal/shape"
)

// plainID reports whether id has the shape that crosses the socket
// unchanged: 1 to 128 bytes of ASCII letters, digits and . _ : -, the
// first a letter or digit. Anything else (OpenAI call ids like
// call_x|fc_y, or hostile text) is hashed.
func plainID(id string) bool { return shape.Token(id, 1, 128, shape.Alnum, idByte) }

// PlainID reports whether id has the shape an id crosses the socket in
// unchanged (1 to 128 bytes of ASCII letters, digits and . _ : -, the
// first a letter or digit): Pi's entry and session ids have it.
func PlainID(id string) bool { return plainID(id) }

func idByte(b byte) bool { return shape.Alnum(b) || b == '.' || b == '_' || b == ':' || b == '-' }

// maxShort bounds the short strings of a part (ids, names, roles, mime
// types, timestamps). One longer than this is hostile or broken; it is
// replaced by its hash so a page stays bounded and nothing is clipped.
const maxShort = 1024

// safeID returns id if it fits plainID, else h- plus 40 hex of its SHA-1.
func safeID(id string) string {
	if plainID(id) {
		return id
	}
	return hashed(id)
}

func hashed(s string) string {
	sum := sha1.Sum([]byte(s))
	return "h-" + hex.EncodeToString(sum[:])
}

// entryKey namespaces a native entry id (n.) apart from notices (x.).
func entryKey(id string) string { return "n." + safeID(id) }

// branchName names the branch an entry starts.
func branchName(id string) string { return "b." + safeID(id) }

// short returns s, or its hash when s is longer than maxShort bytes.
func short(s string) string {
	if len(s) > maxShort {
		return hashed(s)
	}
	return s
}

// Short is short for a page another reader builds (a Claude
// conversation's branch, its leaf's uuid, which the engine writes), so
// that it is bounded as a Pi page's are.
func Short(s string) string { return short(s) }

// cut bounds a string quoted in a message.
func cut(s string) string {
	if len(s) <= 64 {
		return s
	}
	i := 64
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}
