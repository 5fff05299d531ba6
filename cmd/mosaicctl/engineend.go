package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/terminal"
	"github.com/mosaic-agents/mosaic/units"
)

// engineEndLine is one line for a status line or notice: how the engine
// ended and its last stderr line, made inert.
func engineEndLine(e *protocol.EngineEnd) string {
	// An exit explains a failed load check, not the other way round.
	s := "engine " + e.Execution
	if e.Status != "" {
		s += " exited (" + e.Status + ")"
	} else {
		s += " failed its load check: " + e.Preflight
	}
	if n := len(e.Stderr); n > 0 {
		s += "; stderr: " + e.Stderr[n-1]
	}
	return terminal.SanitizeLine(s)
}

// engineEndText is engineEndLine followed by the whole stderr tail, one
// indented inert line each.
func engineEndText(e *protocol.EngineEnd) string {
	var b strings.Builder
	s := "engine of execution " + e.Execution
	if e.Status != "" {
		s += " exited (" + e.Status + ")"
	}
	if e.Preflight != "" {
		s += "; load check: " + e.Preflight
	}
	b.WriteString(terminal.SanitizeLine(s))
	if len(e.Stderr) == 0 {
		b.WriteString("; it wrote nothing on stderr")
		return b.String()
	}
	more := ""
	if e.StderrCut {
		more = " (earlier lines not kept)"
	}
	fmt.Fprintf(&b, "; the last %d lines of its stderr%s:", len(e.Stderr), more)
	for _, l := range e.Stderr {
		b.WriteString("\n    " + terminal.SanitizeLine(l))
	}
	return b.String()
}

// withEngineEnd adds the binding's engine end, if there is one, to a
// refusal or verdict, so the user sees why the engine is gone where the
// refusal is printed, after its code. A no-engine refusal of a binding
// that never launched (idle: no engine, no claim) gets why its controller
// did not launch one instead, and the way out: the controller launches
// only when it starts, so once the cause is fixed (`conv add --replace`,
// a chmod of the env file) nothing launches until it starts again.
func withEngineEnd(err error, b *protocol.Binding) error {
	if err == nil || b == nil {
		return err
	}
	if b.EngineEnd == nil {
		if protocol.CodeOf(err) == protocol.CodeNoEngine && b.State == protocol.BindingIdle {
			return withNotLaunched(err, b)
		}
		return err
	}
	more := "\n" + engineEndText(b.EngineEnd)
	var r *protocol.Refusal
	var v *verdict
	switch {
	case errors.As(err, &v):
		return &verdict{status: v.status, code: v.code, message: v.message + more}
	case errors.As(err, &r):
		c := *r
		c.Message += more
		return &c
	}
	return err
}

// withNotLaunched is withEngineEnd for an idle binding: the reason the
// controller gave when it did not launch, and the restart that launches.
// No engine and no claim: the restart ends no engine and loses nothing.
func withNotLaunched(err error, b *protocol.Binding) error {
	var r *protocol.Refusal
	if !errors.As(err, &r) {
		return err
	}
	hint := noEngineHint(b.Conversation, b)
	if hint == "" {
		return err
	}
	c := *r
	c.Message += "; " + hint
	return &c
}

// restartCommand restarts a conversation's controller.
func restartCommand(id string) string {
	return "systemctl --user restart " + units.ServiceUnit(id)
}
