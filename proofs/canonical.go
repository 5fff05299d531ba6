package proofs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Errors that classify a value the canonical encoder refuses.
var (
	// ErrNonFinite is a NaN or infinite number: JSON has no spelling for it.
	ErrNonFinite = errors.New("non-finite number")
	// ErrDuplicateKey is an object with the same key twice: two readers
	// could see two different values, so the bytes have no single meaning.
	ErrDuplicateKey = errors.New("duplicate object key")
	// ErrInvalidUTF8 is a string that is not valid UTF-8.
	ErrInvalidUTF8 = errors.New("invalid UTF-8 in string")
	// ErrTrailingData is anything after the first JSON value.
	ErrTrailingData = errors.New("trailing data after JSON value")
)

// Canonical returns the canonical JSON encoding of v, the bytes a digest is
// taken over. v is first marshalled with encoding/json (so struct tags
// apply), then re-encoded by CanonicalizeJSON. Being deterministic is the
// whole point: the same value always gives the same bytes.
func Canonical(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		if _, ok := errors.AsType[*json.UnsupportedValueError](err); ok {
			return nil, fmt.Errorf("canonical json: %w: %w", ErrNonFinite, err)
		}
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	return CanonicalizeJSON(raw)
}

// CanonicalizeJSON re-encodes one JSON value canonically: UTF-8, object keys
// sorted by their UTF-8 bytes, no insignificant whitespace, arrays in order,
// integers in plain decimal, other numbers as encoding/json spells a
// float64, strings escaped only where JSON requires it (quote, backslash and
// controls below U+0020, the last as \b \f \n \r \t or \u00xx). It refuses
// non-finite numbers, duplicate keys, invalid UTF-8 and trailing data.
//
// This is close to RFC 8785 but not the same: keys sort by UTF-8 bytes, not
// UTF-16 code units, and no claim of RFC 8785 conformance is made.
func CanonicalizeJSON(raw []byte) ([]byte, error) {
	if !utf8.Valid(raw) {
		return nil, fmt.Errorf("canonical json: %w", ErrInvalidUTF8)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out bytes.Buffer
	if err := encodeValue(dec, &out); err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("canonical json: %w", ErrTrailingData)
	}
	return out.Bytes(), nil
}

// encodeValue reads one value from dec and writes its canonical form.
func encodeValue(dec *json.Decoder, out *bytes.Buffer) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			return encodeObject(dec, out)
		case '[':
			return encodeArray(dec, out)
		}
		return fmt.Errorf("unexpected delimiter %q", t)
	case string:
		return writeString(out, t)
	case json.Number:
		return writeNumber(out, t)
	case bool:
		out.WriteString(strconv.FormatBool(t))
		return nil
	case nil:
		out.WriteString("null")
		return nil
	}
	return fmt.Errorf("unexpected token %v", tok)
}

func encodeObject(dec *json.Decoder, out *bytes.Buffer) error {
	members := map[string][]byte{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, ok := tok.(string)
		if !ok {
			return fmt.Errorf("object key %v is not a string", tok)
		}
		if _, dup := members[key]; dup {
			return fmt.Errorf("%w %q", ErrDuplicateKey, key)
		}
		var val bytes.Buffer
		if err := encodeValue(dec, &val); err != nil {
			return err
		}
		members[key] = val.Bytes()
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return err
	}
	keys := make([]string, 0, len(members))
	for k := range members {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			out.WriteByte(',')
		}
		if err := writeString(out, k); err != nil {
			return err
		}
		out.WriteByte(':')
		out.Write(members[k])
	}
	out.WriteByte('}')
	return nil
}

func encodeArray(dec *json.Decoder, out *bytes.Buffer) error {
	out.WriteByte('[')
	for i := 0; dec.More(); i++ {
		if i > 0 {
			out.WriteByte(',')
		}
		if err := encodeValue(dec, out); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing ']'
		return err
	}
	out.WriteByte(']')
	return nil
}

// writeNumber writes n as a plain decimal integer when it is one that fits
// 64 bits, otherwise as encoding/json spells the float64 it denotes.
func writeNumber(out *bytes.Buffer, n json.Number) error {
	s := string(n)
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		out.WriteString(strconv.FormatInt(i, 10))
		return nil
	}
	if u, err := strconv.ParseUint(s, 10, 64); err == nil {
		out.WriteString(strconv.FormatUint(u, 10))
		return nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return fmt.Errorf("%w: %s", ErrNonFinite, s)
	}
	b, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("%w: %s", ErrNonFinite, s)
	}
	out.Write(b)
	return nil
}

// writeString writes s as a JSON string with the minimal escaping above.
func writeString(out *bytes.Buffer, s string) error {
	if !utf8.ValidString(s) {
		return ErrInvalidUTF8
	}
	const hex = "0123456789abcdef"
	out.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			out.WriteString(`\"`)
		case '\\':
			out.WriteString(`\\`)
		case '\b':
			out.WriteString(`\b`)
		case '\f':
			out.WriteString(`\f`)
		case '\n':
			out.WriteString(`\n`)
		case '\r':
			out.WriteString(`\r`)
		case '\t':
			out.WriteString(`\t`)
		default:
			if c < 0x20 {
				out.WriteString(`\u00`)
				out.WriteByte(hex[c>>4])
				out.WriteByte(hex[c&0xf])
				continue
			}
			out.WriteByte(c)
		}
	}
	out.WriteByte('"')
	return nil
}
