// Package protocol holds the records that cross the conversation socket:
// the JSON-lines envelope, hello/welcome, refusals and the contract records
// (event, receipt, stop, ...). Every package that refuses something a client
// can see returns a *Refusal so the code survives wrapping.
package protocol

import (
	"errors"
	"fmt"
	"strings"
)

// Refusal is a refusal with a stable, machine-readable code and a human
// message. Codes are stable kebab-case names (the brief's where it names
// one: busy, text-policy, already-active, ...), declared in codes.go; they
// never change once published.
type Refusal struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Reconcile tells a client its view may be stale and must be re-read.
	Reconcile bool `json:"reconcile,omitempty"`
	// Err is the underlying cause, kept for logs and errors.Is; never sent.
	Err error `json:"-"`
}

// Refuse returns a *Refusal with a formatted message.
func Refuse(code, format string, args ...any) *Refusal {
	return &Refusal{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns a *Refusal that keeps err as its cause. The message is the
// formatted text followed by the cause's text, once: Err never travels, so
// a client learns the cause only from the message. Callers do not format
// err themselves; an empty format makes the cause the whole message. When
// err carries a refusal, its code is left out of the text: the new code
// replaces it, and errors.As still finds it through Unwrap.
func Wrap(code string, err error, format string, args ...any) *Refusal {
	return &Refusal{Code: code, Message: fold(fmt.Sprintf(format, args...), err), Err: err}
}

// fold appends the text of cause to msg.
func fold(msg string, cause error) string {
	if cause == nil {
		return msg
	}
	text := cause.Error()
	var inner *Refusal
	if errors.As(cause, &inner) {
		text = strings.Replace(text, inner.Code+": "+inner.Message, inner.Message, 1)
	}
	switch {
	case text == "":
		return msg
	case msg == "":
		return text
	}
	return msg + ": " + text
}

// Error returns "code: message"; the message already holds the cause.
func (r *Refusal) Error() string {
	return r.Code + ": " + r.Message
}

// Unwrap returns the cause.
func (r *Refusal) Unwrap() error { return r.Err }

// CodeOf returns the refusal code carried anywhere in err's chain, or "" if
// err carries none.
func CodeOf(err error) string {
	var r *Refusal
	if errors.As(err, &r) {
		return r.Code
	}
	return ""
}
