package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/terminal"
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
// refusal is printed, after its code.
func withEngineEnd(err error, b *protocol.Binding) error {
	if err == nil || b == nil || b.EngineEnd == nil {
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
