package main

import (
	"context"
	"flag"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/client"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/urfave/cli/v2"
)

// TestInterruptIdleTakesNoControl: `interrupt --take` on an engine the
// welcome's binding shows idle is refused no-turn without a takeover, so
// whoever held control (an attached terminal) keeps it. Any other engine
// state goes to the controller, which decides: a turn that settled
// meanwhile is refused there, after the takeover.
func TestInterruptIdleTakesNoControl(t *testing.T) {
	for _, tc := range []struct {
		name        string
		state       string // the binding's state
		engineState string
		takeovers   int
	}{
		{"idle", protocol.BindingActive, protocol.EngineIdle, 0},
		{"busy", protocol.BindingActive, "busy", 1},
		{"waiting for approval", protocol.BindingActive, protocol.EngineWaitingForApproval, 1},
		{"idle while launching", protocol.BindingLaunching, protocol.EngineIdle, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			takeovers := make(chan int, 1)
			s := fakeSession(t, func(w func(any), cmds <-chan protocol.Command) {
				n := 0
				defer func() { takeovers <- n }()
				w(protocol.Binding{Record: protocol.RecordBinding, Conversation: "pi-take", State: tc.state,
					Admission: protocol.AdmissionOpen, Execution: "e-1", Generation: 1, Controller: "k-0",
					ControllerConnected: true, EngineState: tc.engineState})
				for cmd := range cmds {
					switch cmd.Type {
					case protocol.CmdTakeover:
						n++
						w(protocol.ControlRecord{Record: protocol.RecordControl, Request: cmd.Request, Generation: 2, Controller: "k-1", Mode: client.ModeController})
					case protocol.CmdInterrupt:
						// The turn settled between the welcome and the interrupt.
						w(protocol.Refuse(protocol.CodeNoTurn, "nothing is running to interrupt").Record(cmd.Request))
					}
				}
			})
			set := flag.NewFlagSet("interrupt", flag.ContinueOnError)
			set.Bool("take", true, "")
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := s.interrupt(ctx, cli.NewContext(nil, set, nil))
			if protocol.CodeOf(err) != protocol.CodeNoTurn {
				t.Fatalf("interrupt --take: %v; want no-turn", err)
			}
			s.c.Close()
			if n := <-takeovers; n != tc.takeovers {
				t.Fatalf("%d takeovers sent, want %d", n, tc.takeovers)
			}
		})
	}
}
