package history

import (
	"encoding/binary"
	"math/bits"
	"unicode/utf8"
)

// lightDepth bounds the nesting the light scan follows; deeper lines are
// left to encoding/json (whose own limit is 10000).
const lightDepth = 512

// envelope is what the light scan takes from an entry line: the fields
// the tree needs, without decoding the message body.
type envelope struct {
	typ, id, parent string
	// key is entryKey(id) when id is plain: id is its tail, so one
	// allocation makes both.
	key  string
	root bool
	// hint is what the scan learnt of the entry's parts (hintOf).
	hint partHint
}

// light checks that b is one JSON object that encoding/json accepts and
// takes its top-level type, id and parentId, without decoding anything
// else. It answers ok only for a line parseLine would take as a valid
// entry with exactly these fields; anything unusual (an escape or a
// non-ASCII byte in a key or one of these values, a repeated key, a
// value of another type, deep nesting, any syntax error, a second
// header) answers !ok and the caller parses the line in full, so the
// light scan can only be slower than the full parse, never different.
//
// last is the id of the line before, which is usually this one's parent:
// its string is reused instead of allocating another.
func light(b []byte, last string) (envelope, bool) {
	var env envelope
	l := lexer{b: b}
	l.space()
	if !l.eat('{') {
		return env, false
	}
	var sawType, sawID, sawParent, nullParent bool
	// A line short enough that no cut can bind, with plain keys only, may
	// learn its part count (hintOf); messages counts its message members
	// and msg is what the last one showed.
	plain := uncuttable(b)
	messages, msg := 0, hintUnknown
	l.space()
	if l.eat('}') {
		return env, false
	}
	for {
		l.space()
		k, asc, ok := l.plain()
		if !ok {
			return env, false
		}
		plain = plain && asc
		l.space()
		if !l.eat(':') {
			return env, false
		}
		l.space()
		switch keyOf(k) {
		case keyMessage:
			messages++
			if msg = hintUnknown; plain {
				start := l.i
				if msg = l.message(); msg == hintUnknown {
					l.i = start
				} else {
					break
				}
			}
			if !l.value(0) {
				return env, false
			}
		case keyType:
			v, ok := l.plainBytes()
			if !ok || sawType {
				return env, false
			}
			sawType, env.typ = true, typeName(v)
		case keyID:
			v, ok := l.plainBytes()
			if !ok || sawID {
				return env, false
			}
			sawID, env.key = true, "n."+string(v)
			env.id = env.key[len("n."):]
		case keyParent:
			if sawParent {
				return env, false
			}
			sawParent = true
			if l.word("null") {
				nullParent = true
				break
			}
			v, ok := l.plainBytes()
			if !ok {
				return env, false
			}
			if env.parent = last; string(v) != last {
				env.parent = string(v)
			}
		case keyUnsure:
			return env, false
		default:
			if !l.value(0) {
				return env, false
			}
		}
		l.space()
		if l.eat(',') {
			continue
		}
		if !l.eat('}') {
			return env, false
		}
		break
	}
	l.space()
	if l.i != len(b) || !sawType || env.id == "" || env.typ == "session" {
		return env, false
	}
	env.root = !sawParent || nullParent
	if !plainID(env.id) {
		env.key = "" // hashed: made when a page shows it
	}
	if plain {
		env.hint = hintOf(env.typ, messages, msg)
	}
	return env, true
}

// typeName returns the entry types Pi writes without allocating.
func typeName(v []byte) string {
	switch string(v) {
	case "message":
		return "message"
	case "model_change":
		return "model_change"
	case "thinking_level_change":
		return "thinking_level_change"
	case "compaction":
		return "compaction"
	case "branch_summary":
		return "branch_summary"
	case "custom":
		return "custom"
	case "custom_message":
		return "custom_message"
	case "label":
		return "label"
	case "session_info":
		return "session_info"
	}
	return string(v)
}

// The top-level keys the light scan tells apart.
const (
	keyOther = iota
	keyType
	keyID
	keyParent
	keyMessage
	keyUnsure // a key folding could match that the light scan does not judge
)

// keyOf matches a key as encoding/json matches field names: exactly or
// case-insensitively. Only ASCII letters can fold onto type, id or
// parentId (no s or k, whose Unicode folds are not ASCII), so a key of
// their length with another byte is left to encoding/json.
func keyOf(k []byte) int {
	if len(k) == len("message") {
		if fold(k, "message") {
			return keyMessage
		}
		return keyOther
	}
	if len(k) != 2 && len(k) != 4 && len(k) != 8 {
		return keyOther
	}
	var buf [8]byte
	for i, c := range k {
		if c >= utf8.RuneSelf {
			return keyUnsure
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	switch string(buf[:len(k)]) {
	case "type":
		return keyType
	case "id":
		return keyID
	case "parentid":
		return keyParent
	}
	return keyOther
}

// lexer walks one line as encoding/json's scanner would accept it.
type lexer struct {
	b []byte
	i int
}

func (l *lexer) space() {
	for l.i < len(l.b) {
		switch l.b[l.i] {
		case ' ', '\t', '\r', '\n':
			l.i++
		default:
			return
		}
	}
}

func (l *lexer) eat(c byte) bool {
	if l.i < len(l.b) && l.b[l.i] == c {
		l.i++
		return true
	}
	return false
}

// plainBytes reads a string with no escape and valid UTF-8, the only
// kind whose bytes are its value.
func (l *lexer) plainBytes() ([]byte, bool) {
	b, _, ok := l.plain()
	return b, ok
}

// plain is plainBytes that also tells whether the string is ASCII. The
// scan of the string already saw every byte, so only a string with a
// byte over 0x7f is checked for valid UTF-8 again.
func (l *lexer) plain() (b []byte, ascii, ok bool) {
	if !l.eat('"') {
		return nil, false, false
	}
	start := l.i
	end, esc, wide, ok := l.skipString()
	if !ok || esc || wide && !utf8.Valid(l.b[start:end]) {
		return nil, false, false
	}
	return l.b[start:end], !wide, true
}

// value skips one JSON value.
func (l *lexer) value(depth int) bool {
	if l.i >= len(l.b) || depth > lightDepth {
		return false
	}
	switch c := l.b[l.i]; {
	case c == '"':
		l.i++
		_, _, _, ok := l.skipString()
		return ok
	case c == '{':
		return l.items(depth, '}', true)
	case c == '[':
		return l.items(depth, ']', false)
	case c == 't':
		return l.word("true")
	case c == 'f':
		return l.word("false")
	case c == 'n':
		return l.word("null")
	case c == '-' || '0' <= c && c <= '9':
		return l.number()
	}
	return false
}

// items skips the members of an object (keyed) or the elements of an
// array after its opening bracket, up to and including end.
func (l *lexer) items(depth int, end byte, keyed bool) bool {
	l.i++
	l.space()
	if l.eat(end) {
		return true
	}
	for {
		l.space()
		if keyed {
			if !l.eat('"') {
				return false
			}
			if _, _, _, ok := l.skipString(); !ok {
				return false
			}
			l.space()
			if !l.eat(':') {
				return false
			}
			l.space()
		}
		if !l.value(depth + 1) {
			return false
		}
		l.space()
		if !l.eat(',') {
			return l.eat(end)
		}
	}
}

func (l *lexer) word(w string) bool {
	if len(l.b)-l.i >= len(w) && string(l.b[l.i:l.i+len(w)]) == w {
		l.i += len(w)
		return true
	}
	return false
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
func (l *lexer) number() bool {
	l.eat('-')
	switch {
	case l.eat('0'):
	case l.digits() == 0:
		return false
	}
	if l.eat('.') && l.digits() == 0 {
		return false
	}
	if l.eat('e') || l.eat('E') {
		if !l.eat('+') {
			l.eat('-')
		}
		if l.digits() == 0 {
			return false
		}
	}
	return true
}

func (l *lexer) digits() int {
	n := 0
	for l.i < len(l.b) && '0' <= l.b[l.i] && l.b[l.i] <= '9' {
		l.i++
		n++
	}
	return n
}

const (
	lo8 = 0x0101010101010101
	hi8 = 0x8080808080808080
)

// special marks, in each byte of w, a quote, a backslash or a control
// character (a byte below 0x20), eight bytes at a time.
func special(w uint64) uint64 {
	q := w ^ (lo8 * '"')
	s := w ^ (lo8 * '\\')
	return ((q-lo8)&^q | (s-lo8)&^s | (w-lo8*0x20)&^w) & hi8
}

// skipString skips the rest of a string after its opening quote and
// returns the index of the closing quote, whether it held an escape or a
// byte over 0x7f (wide), and whether it is valid: escapes as JSON has
// them and no control character. Invalid UTF-8 is accepted, as
// encoding/json does.
func (l *lexer) skipString() (end int, esc, wide, ok bool) {
	b := l.b
	i := l.i
	var seen uint64 // the bytes before i ORed, for their high bits
	for {
		for len(b)-i >= 8 {
			w := binary.LittleEndian.Uint64(b[i:])
			if m := special(w); m != 0 {
				n := bits.TrailingZeros64(m)
				seen |= w & (1<<n - 1) // the bytes before the special one
				i += n / 8
				break
			}
			seen |= w
			i += 8
		}
		if i >= len(b) {
			return 0, esc, false, false
		}
		switch c := b[i]; {
		case c == '"':
			l.i = i + 1
			return i, esc, seen&hi8 != 0, true
		case c == '\\':
			esc = true
			if i+1 >= len(b) {
				return 0, esc, false, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(b)-i < 6 || !hex4(b[i+2:i+6]) {
					return 0, esc, false, false
				}
				i += 6
			default:
				return 0, esc, false, false
			}
		case c < 0x20:
			return 0, esc, false, false
		default:
			seen |= uint64(c)
			i++
		}
	}
}

func hex4(h []byte) bool {
	for _, c := range h {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}
