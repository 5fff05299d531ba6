package protocol

import (
	"bytes"
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
