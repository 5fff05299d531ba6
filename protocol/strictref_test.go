package protocol

import (
	"fmt"
	"strconv"
	"testing"
	"unicode/utf8"
)

// refValidateAt is ValidateAt as it was before its scan took plain string
// bytes by a table, compared keys without a map for small objects and
// read integers without a string: FuzzValidateMatchesReference holds the
// two to the same verdict and message on any line.
func refValidateAt(line []byte, depth int) error {
	if !utf8.Valid(line) {
		return fmt.Errorf("%w: invalid UTF-8", ErrMalformed)
	}
	s := &refScanner{b: line}
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

type refScanner struct {
	b []byte
	i int
}

func (s *refScanner) fail(format string, args ...any) error {
	return fmt.Errorf("%w at byte %d: %s", ErrMalformed, s.i, fmt.Sprintf(format, args...))
}

func (s *refScanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *refScanner) value(depth int) error {
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

func (s *refScanner) object(depth int) error {
	s.i++ // {
	seen := map[string]bool{}
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
		key, err := s.str()
		if err != nil {
			return err
		}
		if seen[key] {
			return s.fail("duplicate key %q", key)
		}
		seen[key] = true
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

func (s *refScanner) array(depth int) error {
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

// str scans a string and returns its raw contents (escapes undecoded,
// which is enough to compare keys for duplicates: two spellings of one key
// are refused by the surrogate and escape rules below or compared raw).
func (s *refScanner) str() (string, error) {
	s.i++ // opening quote
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			raw := string(s.b[start:s.i])
			s.i++
			return refUnescapeKey(raw), nil
		case c < 0x20:
			return "", s.fail("control character in string")
		case c == '\\':
			if err := s.escape(); err != nil {
				return "", err
			}
		default:
			s.i++
		}
	}
	return "", s.fail("unterminated string")
}

func (s *refScanner) escape() error {
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
func (s *refScanner) hex4() (rune, error) {
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

func (s *refScanner) number() error {
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
	lit := string(s.b[start:s.i])
	if isInt {
		n, err := strconv.ParseInt(lit, 10, 64)
		if err != nil || n > maxSafeInteger || n < -maxSafeInteger {
			return s.fail("integer %s outside the safe range ±(2^53-1)", lit)
		}
		return nil
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil || f != f || f > 1.7976931348623157e308 || f < -1.7976931348623157e308 {
		return s.fail("number %s is not finite", lit)
	}
	return nil
}

// unescapeKey decodes a key's escapes so "a" and "\u0061" count as the same
// key; the input has already passed the escape checks.
func refUnescapeKey(raw string) string {
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

// FuzzValidateMatchesReference: Validate refuses exactly what the
// reference refuses, with the same message, and takes the rest.
func FuzzValidateMatchesReference(f *testing.F) {
	for _, seed := range []string{
		`{"type":"hello"}`, `{"a":[1,2,{"b":null}],"c":true,"d":-0.5e3}`, `{"t":"\ud83d\ude00"}`,
		`{"n":9007199254740991}`, `{"n":-9007199254740991}`, `{"n":9007199254740992}`, `{"n":-9007199254740992}`,
		`{"n":12345678901234567890123}`, `{"n":-0}`, `{"n":01}`, `{"n":1e999}`, `{"type":1,"typ\u0065":2}`,
		`{"a\/b":1,"a/b":2}`, `{"t":"a` + "\x01" + `"}`, `{"t":"abc`, `{"t":"\x"}`, `{"t":"\u12"}`,
		`{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k16":16,"k3":3}`,
		`{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k16":16,"k17":17}`,
		`{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k15":16}`,
		"{\"t\":\"\xff\"}", `[{"a":{"a":{"a":1,"a":2}}}]`,
	} {
		f.Add([]byte(seed), 0)
	}
	f.Fuzz(func(t *testing.T, line []byte, depth int) {
		depth = depth % (maxDepth + 2)
		got, want := ValidateAt(line, depth), refValidateAt(line, depth)
		if (got == nil) != (want == nil) || (got != nil && got.Error() != want.Error()) {
			t.Fatalf("ValidateAt(%q, %d) = %v, the reference says %v", line, depth, got, want)
		}
	})
}
