package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
)

// Version is the newest client protocol this build speaks. A hello may
// name it or an older one, and the welcome answers with the one the
// connection speaks; a hello naming a newer one is refused with
// CodeProtocolVersion. Protocol 2 adds runs of deltas (Event.Texts).
const Version = 2

// MaxLine is the default cap on one client line, in bytes. A longer line is
// refused with CodeLineTooLong and the connection is closed: the stream
// cannot be resynchronised without reading the line, and reading it
// unbounded is what the cap is for.
const MaxLine = 1 << 20

// MaxPromptChars is the contract's cap on a prompt or edit text, in
// characters: a longer or empty one is refused CodeDraft. It is here, not
// in the controller, so a client can refuse such a text before it takes
// control for it.
const MaxPromptChars = 262144

// Hello is the first line a client sends. Every field but Type is optional.
type Hello struct {
	Type     string `json:"type"`
	Client   string `json:"client,omitempty"`
	Protocol int    `json:"protocol,omitempty"`
}

// Welcome answers a hello. Every connection starts as an observer.
//
// Lines a client sends name their kind in "type"; lines the server sends
// name theirs in "record", so neither side can mistake one for the other.
type Welcome struct {
	Record       string `json:"record"`
	Conversation string `json:"conversation"`
	Connection   string `json:"connection"`
	Mode         string `json:"mode"`
	Server       string `json:"server"`
	Protocol     int    `json:"protocol"`
	// Starting is set when the controller answered the hello before its
	// start-up finished: the connection's binding follows once it has,
	// and the server reads none of its lines before that.
	Starting bool `json:"starting,omitempty"`
}

// RefusalRecord is a refusal as it travels on the socket.
type RefusalRecord struct {
	Record    string `json:"record"`
	Code      string `json:"code"`
	Message   string `json:"message"`
	Request   string `json:"request,omitempty"`
	Reconcile bool   `json:"reconcile,omitempty"`
}

// Record returns r as its wire record.
func (r *Refusal) Record(request string) RefusalRecord {
	return RefusalRecord{Record: RecordRefusal, Code: r.Code, Message: r.Message, Request: request, Reconcile: r.Reconcile}
}

// ErrLineTooLong is returned by LineReader for a line over its cap.
var ErrLineTooLong = errors.New("line too long")

// Decode validates line strictly and unmarshals it into v, refusing unknown
// fields. Every failure is a *Refusal with CodeMalformed or CodeInvalidUTF8.
func Decode(line []byte, v any) error {
	if err := Validate(line); err != nil {
		if !utf8Valid(line) {
			return Wrap(CodeInvalidUTF8, err, "the line is not valid UTF-8")
		}
		return Wrap(CodeMalformed, err, "the line is not a strict JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return Wrap(CodeMalformed, err, "the record does not fit its shape")
	}
	return nil
}

// Type returns the "type" field of a strict JSON object line.
func Type(line []byte) (string, error) {
	var head struct {
		Type string `json:"type"`
	}
	if err := Validate(line); err != nil {
		if !utf8Valid(line) {
			return "", Wrap(CodeInvalidUTF8, err, "the line is not valid UTF-8")
		}
		return "", Wrap(CodeMalformed, err, "the line is not a strict JSON object")
	}
	if err := json.Unmarshal(line, &head); err != nil || head.Type == "" {
		return "", Refuse(CodeMalformed, "the line is not a JSON object with a string \"type\"")
	}
	return head.Type, nil
}
