// Package protocol holds the records that cross the conversation socket:
// the JSON-lines envelope, hello/welcome, refusals and the contract records
// (event, receipt, stop, ...). Every package that refuses something a client
// can see returns a *Refusal so the code survives wrapping.
package protocol

import (
	"errors"
	"fmt"
)

// Refusal is a refusal with a stable, machine-readable code and a human
// message. Codes are kebab-case names from the brief (busy, text-policy,
// already-active, ...); they never change once published.
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

// Wrap returns a *Refusal that keeps err as its cause.
func Wrap(code string, err error, format string, args ...any) *Refusal {
	return &Refusal{Code: code, Message: fmt.Sprintf(format, args...), Err: err}
}

func (r *Refusal) Error() string {
	if r.Err != nil {
		return fmt.Sprintf("%s: %s: %v", r.Code, r.Message, r.Err)
	}
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
