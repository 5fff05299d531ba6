package history

import "unicode/utf8"

// partHint is what the light scan learnt of how many parts an entry
// makes, so that counting a branch's parts (the newest page numbers its
// parts branch-wide) need not decode every entry. It is exact or unknown:
// an entry with hintOne is cut, once decoded, into exactly one part, and
// FuzzLight holds the scan to that.
type partHint uint8

const (
	hintUnknown partHint = iota // decode the entry to know
	hintNone                    // the entry shows nothing
	hintOne                     // the entry is exactly one part
)

// A line of n bytes decodes to strings of at most 3n bytes (an invalid
// byte becomes U+FFFD), at most n when it is valid UTF-8, and every
// decoded string, tool call arguments included, escapes back to at most
// 6n bytes, all of them together too. At most hintBytes (3n ≤
// MaxStringChars, 6n ≤ maxFragmentBytes), or at most hintValidBytes and
// valid UTF-8 (n ≤ MaxStringChars, 6n ≤ maxFragmentBytes), no string is
// cut into fragments, and a part of at most MaxPartBlocks blocks stays
// under maxPartBytes (6n plus fragmentOverhead per block).
const (
	hintBytes      = 64 << 10
	hintValidBytes = 128 << 10
)

// uncuttable reports whether line b is too short for any cut but the
// block count to bind.
func uncuttable(b []byte) bool {
	return len(b) <= hintBytes || len(b) <= hintValidBytes && utf8.Valid(b)
}

// hintOf is the part hint of an uncuttable line with plain ASCII keys, of
// type typ, with messages members that fold to "message", the last of
// which showed msg. It follows viewOf and messageOf: state shows nothing;
// a custom_message shows by its display flag, which the scan does not
// judge; anything else but a message shows as one part, a notice at
// worst.
func hintOf(typ string, messages int, msg partHint) partHint {
	if stateType(typ) {
		return hintNone
	}
	switch typ {
	case "custom_message":
		return hintUnknown
	case "message":
		switch messages {
		case 0:
			return hintOne // no message: a malformed-entry notice
		case 1:
			return msg
		}
		return hintUnknown // encoding/json keeps the last; leave it to it
	}
	return hintOne
}

// message reads a message member's value and tells whether it is one
// part: it is unless its role is "custom" (shown only by its display
// flag) or it has more blocks than one part holds. A value that is not an
// object, a role that is not a string, or content that does not decode
// make a notice, also one part. Anything the scan does not judge exactly
// (a repeated or folded key that is not plain ASCII, an escaped role, a
// syntax error) answers hintUnknown, and the caller skips the value
// again with value.
func (l *lexer) message() partHint {
	if l.i >= len(l.b) || l.b[l.i] != '{' {
		if !l.value(0) {
			return hintUnknown
		}
		return hintOne
	}
	l.i++
	var roles, contents, blocks int
	custom := false
	l.space()
	if l.eat('}') {
		return hintOne
	}
	for {
		l.space()
		k, asc, ok := l.plain()
		if !ok || !asc {
			return hintUnknown
		}
		l.space()
		if !l.eat(':') {
			return hintUnknown
		}
		l.space()
		switch {
		case fold(k, "role"):
			roles++
			if l.i < len(l.b) && l.b[l.i] == '"' {
				v, ok := l.plainBytes()
				if !ok {
					return hintUnknown
				}
				custom = string(v) == "custom"
			} else if !l.value(1) {
				return hintUnknown
			}
		case fold(k, "content"):
			contents++
			if blocks, ok = l.blocks(); !ok {
				return hintUnknown
			}
		default:
			if !l.value(1) {
				return hintUnknown
			}
		}
		l.space()
		if l.eat(',') {
			continue
		}
		if !l.eat('}') {
			return hintUnknown
		}
		break
	}
	if roles > 1 || contents > 1 || custom || blocks > MaxPartBlocks {
		return hintUnknown
	}
	return hintOne
}

// blocks reads a message's content and returns how many blocks it makes
// at most: an array's elements (a bad element makes a notice instead), one
// for a string, none for anything else.
func (l *lexer) blocks() (int, bool) {
	if l.i >= len(l.b) || l.b[l.i] != '[' {
		return 1, l.value(1)
	}
	l.i++
	l.space()
	if l.eat(']') {
		return 0, true
	}
	for n := 1; ; n++ {
		l.space()
		if !l.value(2) {
			return 0, false
		}
		l.space()
		if !l.eat(',') {
			return n, l.eat(']')
		}
	}
}

// fold reports whether key k, plain ASCII, is w as encoding/json matches
// field names: exactly or case-insensitively. w is lower case.
func fold(k []byte, w string) bool {
	if len(k) != len(w) {
		return false
	}
	for i, c := range k {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != w[i] {
			return false
		}
	}
	return true
}
