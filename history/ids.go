package history

import (
	"crypto/sha1"
	"encoding/hex"
	"regexp"
	"unicode/utf8"
)

// idPattern is the id shape that crosses the socket unchanged. Anything
// else (OpenAI call ids like call_x|fc_y, or hostile text) is hashed.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)

// maxShort bounds the short strings of a part (ids, names, roles, mime
// types, timestamps). One longer than this is hostile or broken; it is
// replaced by its hash so a page stays bounded and nothing is clipped.
const maxShort = 1024

// safeID returns id if it fits idPattern, else h- plus 40 hex of its SHA-1.
func safeID(id string) string {
	if idPattern.MatchString(id) {
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
