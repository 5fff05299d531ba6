package protocol

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// maxDepth bounds nesting so a hostile line cannot exhaust the stack.
const maxDepth = 64

// maxSafeInteger is 2^53-1: larger integers do not survive a JavaScript
// client (the web page), so the contract refuses them.
const maxSafeInteger = 1<<53 - 1

// ErrMalformed classifies every strictness failure of Validate.
var ErrMalformed = errors.New("malformed JSON")

// Validate checks that line is one strict JSON value: valid UTF-8, no
// duplicate object keys, no unpaired surrogate escapes, no integers outside
// the safe range, bounded nesting. encoding/json accepts all of these
// silently (last duplicate wins, a lone surrogate becomes U+FFFD), so the
// contract's decoding rules need this pass before Unmarshal.
func Validate(line []byte) error { return ValidateAt(line, 0) }

// ValidateAt is Validate for a raw value that a record carries depth
// levels down (0 is the record itself): the nesting bound counts the
// record's levels above it. The server checks an engine's raw JSON with
// it before copying it into a record, since encoding/json, which read
// it, accepts what a client's Validate of the record would refuse.
func ValidateAt(line []byte, depth int) error {
	if !utf8.Valid(line) {
		return fmt.Errorf("%w: invalid UTF-8", ErrMalformed)
	}
	s := &scanner{b: line}
	s.space()
	if err := s.value(depth); err != nil {
		return err
	}
	s.space()
	if s.i != len(s.b) {
		return s.fail("trailing data after the JSON value")
	}
	return nil
}

type scanner struct {
	b []byte
	i int
}

func (s *scanner) fail(format string, args ...any) error {
	return fmt.Errorf("%w at byte %d: %s", ErrMalformed, s.i, fmt.Sprintf(format, args...))
}

func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) value(depth int) error {
	if depth > maxDepth {
		return s.fail("nesting deeper than %d", maxDepth)
	}
	if s.i >= len(s.b) {
		return s.fail("unexpected end of input")
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.object(depth)
	case c == '[':
		return s.array(depth)
	case c == '"':
		_, err := s.str()
		return err
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	default:
		for _, lit := range []string{"true", "false", "null"} {
			if len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
				s.i += len(lit)
				return nil
			}
		}
		return s.fail("unexpected character %q", c)
	}
}

// smallObject is how many keys an object's duplicate check compares one
// by one before it takes a map: a record's objects have a dozen keys or
// so, and the comparisons cost less than the map and a string per key; a
// hostile object with many keys still costs one map lookup per key.
const smallObject = 16

func (s *scanner) object(depth int) error {
	s.i++ // {
	var few [smallObject][]byte
	keys := few[:0]
	var seen map[string]bool
	s.space()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return nil
	}
	for {
		s.space()
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return s.fail("expected an object key")
		}
		key, err := s.key()
		if err != nil {
			return err
		}
		switch {
		case seen != nil:
			if seen[string(key)] {
				return s.fail("duplicate key %q", key)
			}
			seen[string(key)] = true
		case len(keys) < smallObject:
			for _, k := range keys {
				if string(k) == string(key) {
					return s.fail("duplicate key %q", key)
				}
			}
			keys = append(keys, key)
		default:
			seen = make(map[string]bool, 2*smallObject)
			for _, k := range keys {
				seen[string(k)] = true
			}
			if seen[string(key)] {
				return s.fail("duplicate key %q", key)
			}
			seen[string(key)] = true
		}
		s.space()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return s.fail("expected ':'")
		}
		s.i++
		s.space()
		if err := s.value(depth + 1); err != nil {
			return err
		}
		s.space()
		if s.i >= len(s.b) {
			return s.fail("unterminated object")
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case '}':
			s.i++
			return nil
		default:
			return s.fail("expected ',' or '}'")
		}
	}
}

func (s *scanner) array(depth int) error {
	s.i++ // [
	s.space()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		return nil
	}
	for {
		s.space()
		if err := s.value(depth + 1); err != nil {
			return err
		}
		s.space()
		if s.i >= len(s.b) {
			return s.fail("unterminated array")
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case ']':
			s.i++
			return nil
		default:
			return s.fail("expected ',' or ']'")
		}
	}
}

// key scans an object key and returns it as it compares for duplicates:
// its raw contents, or with its escapes decoded when it has any, so "a"
// and "\u0061" count as the same key.
func (s *scanner) key() ([]byte, error) {
	start := s.i + 1
	escaped, err := s.str()
	if err != nil {
		return nil, err
	}
	raw := s.b[start : s.i-1]
	if escaped {
		return []byte(unescapeKey(string(raw))), nil
	}
	return raw, nil
}

// str scans a string and says whether it holds an escape.
func (s *scanner) str() (escaped bool, err error) {
	s.i++ // opening quote
	for s.i < len(s.b) {
		// Plain bytes first, most of a string, one table load each.
		for s.i < len(s.b) && !strStop[s.b[s.i]] {
			s.i++
		}
		if s.i >= len(s.b) {
			break
		}
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			return escaped, nil
		case c < 0x20:
			return false, s.fail("control character in string")
		default: // a backslash
			escaped = true
			if err := s.escape(); err != nil {
				return false, err
			}
		}
	}
	return false, s.fail("unterminated string")
}

// strStop marks the bytes a string scan stops at: the quote, the
// backslash and control characters (UTF-8 is checked for the whole line
// first).
var strStop = func() (t [256]bool) {
	for c := range 256 {
		t[c] = c == '"' || c == '\\' || c < 0x20
	}
	return t
}()

func (s *scanner) escape() error {
	s.i++ // backslash
	if s.i >= len(s.b) {
		return s.fail("unterminated escape")
	}
	switch s.b[s.i] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		s.i++
		return nil
	case 'u':
		r, err := s.hex4()
		if err != nil {
			return err
		}
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return s.fail("unpaired low surrogate \\u%04X", r)
		case r >= 0xD800 && r <= 0xDBFF:
			if s.i+1 >= len(s.b) || s.b[s.i] != '\\' || s.b[s.i+1] != 'u' {
				return s.fail("unpaired high surrogate \\u%04X", r)
			}
			s.i++
			lo, err := s.hex4()
			if err != nil {
				return err
			}
			if lo < 0xDC00 || lo > 0xDFFF {
				return s.fail("unpaired high surrogate \\u%04X", r)
			}
		}
		return nil
	default:
		return s.fail("invalid escape \\%c", s.b[s.i])
	}
}

// hex4 reads the four hex digits after \u (s.i at the 'u').
func (s *scanner) hex4() (rune, error) {
	if len(s.b)-s.i < 5 {
		return 0, s.fail("short \\u escape")
	}
	v, err := strconv.ParseUint(string(s.b[s.i+1:s.i+5]), 16, 32)
	if err != nil {
		return 0, s.fail("invalid \\u escape")
	}
	s.i += 5
	return rune(v), nil
}

func (s *scanner) number() error {
	start := s.i
	if s.b[s.i] == '-' {
		s.i++
	}
	digits := func() int {
		n := 0
		for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
			s.i++
			n++
		}
		return n
	}
	intStart := s.i
	if digits() == 0 {
		return s.fail("invalid number")
	}
	if s.b[intStart] == '0' && s.i-intStart > 1 {
		return s.fail("leading zero in number")
	}
	isInt := true
	if s.i < len(s.b) && s.b[s.i] == '.' {
		isInt = false
		s.i++
		if digits() == 0 {
			return s.fail("invalid fraction")
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		isInt = false
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if digits() == 0 {
			return s.fail("invalid exponent")
		}
	}
	if isInt {
		// At most 16 digits, the length of 2^53-1, without a leading
		// zero: the digits are the magnitude, compared as ParseInt's
		// value would be.
		var n uint64
		digits := s.b[intStart:s.i]
		for _, c := range digits {
			n = n*10 + uint64(c-'0')
		}
		if len(digits) > 16 || n > maxSafeInteger {
			return s.fail("integer %s outside the safe range ±(2^53-1)", s.b[start:s.i])
		}
		return nil
	}
	lit := string(s.b[start:s.i])
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil || f != f || f > 1.7976931348623157e308 || f < -1.7976931348623157e308 {
		return s.fail("number %s is not finite", lit)
	}
	return nil
}

// unescapeKey decodes a key's escapes so "a" and "\u0061" count as the same
// key; the input has already passed the escape checks.
func unescapeKey(raw string) string {
	for i := 0; i < len(raw); i++ {
		if raw[i] == '\\' {
			if v, err := strconv.Unquote(`"` + raw + `"`); err == nil {
				return v
			}
			return raw
		}
	}
	return raw
}
