package protocol

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
)

// Line encodes v as one record line, LF included, without HTML escaping:
// encoding/json's default turns <, > and & into \u003c, \u003e and \u0026,
// inside strings and inside every raw value (tool arguments and results,
// a history page) it copies, so a command line would reach a client as
// "2\u003e\u00261" and grow sixfold. Every record the controller writes
// goes through Line, so a client renders raw values as the engine wrote
// them and never has to undo an escape. The JSON is the same; U+2028 and
// U+2029 stay escaped, so no payload byte can end or split a line.
func Line(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Marshal is Line without the LF: the JSON of a value that is embedded in
// a record, such as a history page.
func Marshal(v any) ([]byte, error) {
	b, err := Line(v)
	if err != nil {
		return nil, err
	}
	return b[:len(b)-1], nil
}

// LineWith is Line for a record that carries raw in a json.RawMessage
// field (field points at it, inside v): a history page, which can be
// megabytes. Line would have encoding/json validate and compact raw
// again, which for a page costs more than encoding the page did; here v
// is encoded with a marker in the field, and raw takes the marker's
// place. raw must be what Marshal wrote (compact, its raw values already
// compacted and escaped as Line leaves them), so the line is byte for
// byte the one Line writes (TestLineWithIsLine), and the record must not
// nest past encoding/json's bound of 10000 levels, which Line refuses and
// LineWith, checking nothing, does not (a history page passes
// ValidateAt: its raw values are bounded far below). A marker that does not
// occur exactly once, which a random one cannot fail to, leaves it to Line.
func LineWith(v any, field *json.RawMessage, raw json.RawMessage) ([]byte, error) {
	if len(raw) == 0 || (raw[0] != '{' && raw[0] != '[') {
		*field = raw
		return Line(v)
	}
	var nonce [12]byte
	rand.Read(nonce[:])
	marker := []byte(`"mosaic-raw-` + hex.EncodeToString(nonce[:]) + `"`)
	*field = marker
	line, err := Line(v)
	*field = raw
	if err != nil {
		return nil, err
	}
	i := bytes.Index(line, marker)
	if i < 0 || bytes.Contains(line[i+len(marker):], marker) {
		return Line(v)
	}
	out := make([]byte, 0, len(line)-len(marker)+len(raw))
	out = append(out, line[:i]...)
	out = append(out, raw...)
	return append(out, line[i+len(marker):]...), nil
}
