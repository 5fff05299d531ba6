package main

import (
	"testing"

	"github.com/mosaic-agents/mosaic/protocol"
)

// TestStopDuring: a force stop refused because the stop its confirmation
// was issued during has ended follows that stop only while the binding
// still names it and the same execution; otherwise the verb must confirm
// again rather than report an older stop as this one's outcome.
func TestStopDuring(t *testing.T) {
	cf := &protocol.Confirmation{StopContext: "s-1/" + protocol.StopStopping, Execution: "x-1"}
	for _, tc := range []struct {
		name string
		cf   *protocol.Confirmation
		b    *protocol.Binding
		want string
	}{
		{"the stop it was issued during", cf, &protocol.Binding{LastStop: "s-1", Execution: "x-1"}, "s-1"},
		{"a later stop", cf, &protocol.Binding{LastStop: "s-2", Execution: "x-1"}, ""},
		{"a later execution", cf, &protocol.Binding{LastStop: "s-1", Execution: "x-2"}, ""},
		{"issued with no stop running", &protocol.Confirmation{StopContext: "binding/" + protocol.BindingStopped, Execution: "x-1"},
			&protocol.Binding{LastStop: "s-1", Execution: "x-1"}, ""},
		{"issued after the stop ended", &protocol.Confirmation{StopContext: "s-1/" + protocol.StopStopped, Execution: "x-1"},
			&protocol.Binding{LastStop: "s-1", Execution: "x-1"}, ""},
		{"no binding", cf, nil, ""},
		{"no confirmation", nil, &protocol.Binding{LastStop: "s-1", Execution: "x-1"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := stopDuring(tc.cf, tc.b); got != tc.want {
				t.Fatalf("stopDuring = %q, want %q", got, tc.want)
			}
		})
	}
}
