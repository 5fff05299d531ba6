package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/client"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/urfave/cli/v2"
)

// TestConfirmsAgainWhenTheStopEnds: a confirmation is bound to the stop
// context, and a controller runs stops by itself (a restarted controller
// stops what is left of an orphan's cohort). `stop --take --yes` on an
// orphan: the acquire-recovery-control confirmation issued while that stop
// ran and used after it ended was refused (the stop context changed) — the
// race a CI run of TestAdviceWorksWhenOnlyTheScopeIsLeft hit; and the force
// stop's own confirmation, used after such a stop ended uncertain. Each
// verb confirms once more, bound to the state as it now is, and goes on; a
// second change of context is refused as before. The fake servers play the
// controller's order: the binding that says the stop ended, then the
// refusal.
func TestConfirmsAgainWhenTheStopEnds(t *testing.T) {
	yes := consent{yes: true, why: "--yes"}
	verbs := []struct {
		name  string
		serve func(w func(any), cmds <-chan protocol.Command, changes int) int
		run   func(ctx context.Context, s *session) error
	}{
		{"take", stopEndingController, func(ctx context.Context, s *session) error {
			set := flag.NewFlagSet("stop", flag.ContinueOnError)
			set.Bool("take", true, "")
			return s.take(ctx, cli.NewContext(nil, set, nil), true, yes)
		}},
		{"force stop", stopEndedUncertainController, func(ctx context.Context, s *session) error {
			rc, err := s.forceStop(ctx, yes)
			if err == nil && (rc == nil || rc.State != protocol.ReceiptStopped || rc.Stop != "s-2") {
				return fmt.Errorf("receipt %+v, want stopped by the verb's own stop s-2", rc)
			}
			return err
		}},
	}
	for _, v := range verbs {
		for _, tc := range []struct {
			name     string
			changes  int // how many uses the fake refuses for a changed context
			wantCode string
			issued   int
		}{
			{"the stop ended once", 1, "", 2},
			{"the context keeps changing", 2, protocol.CodeConfirmation, 2},
		} {
			t.Run(v.name+"/"+tc.name, func(t *testing.T) {
				issued := make(chan int, 1)
				s := fakeSession(t, func(w func(any), cmds <-chan protocol.Command) { issued <- v.serve(w, cmds, tc.changes) })
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				err := v.run(ctx, s)
				if got := protocol.CodeOf(err); got != tc.wantCode || (tc.wantCode == "" && err != nil) {
					t.Fatalf("%s: %v (code %q), want code %q", v.name, err, got, tc.wantCode)
				}
				s.c.Close()
				if n := <-issued; n != tc.issued {
					t.Fatalf("%d confirmations issued, want %d", n, tc.issued)
				}
			})
		}
	}
}

// stopEndingController answers take's commands as a controller whose own
// stop s-1 of execution e-1 was running when the first confirmation was
// issued and ends before each of the first changes acquires. It returns
// how many confirmations it issued.
func stopEndingController(w func(any), cmds <-chan protocol.Command, changes int) int {
	issued, refused := 0, 0
	stopCtx := "s-1/" + protocol.StopStopping
	binding := protocol.Binding{Record: protocol.RecordBinding, Conversation: "pi-take", State: protocol.BindingStopping, Execution: "e-1", LastStop: "s-1"}
	w(binding)
	for cmd := range cmds {
		switch cmd.Type {
		case protocol.CmdTakeover:
			w(protocol.Refuse(protocol.CodeFenced, "the binding is %s", binding.State).Record(cmd.Request))
		case protocol.CmdIssueConfirmation:
			issued++
			w(protocol.Confirmation{Record: protocol.RecordConfirmation, ID: "cf-" + string(rune('0'+issued)), Request: cmd.Request,
				Operation: cmd.Operation, State: protocol.ConfirmationIssued, Connection: "k-1", Execution: "e-1", StopContext: stopCtx,
				Intent: "take recovery control"})
		case protocol.CmdAnswerConfirmation:
			w(protocol.Confirmation{Record: protocol.RecordConfirmation, ID: cmd.Confirmation, Request: cmd.Request,
				Operation: protocol.CmdAcquireRecoveryControl, State: protocol.ConfirmationAnswered, Connection: "k-1", Execution: "e-1", StopContext: stopCtx})
		case protocol.CmdAcquireRecoveryControl:
			if refused < changes {
				refused++
				// The stop ends (stopped, then, in the second round, a
				// later state): the binding goes out before the refusal.
				stopCtx = "s-1/" + protocol.StopStopped
				if refused > 1 {
					stopCtx = "binding/" + protocol.BindingUncertain
				}
				binding.State = protocol.BindingStopped
				w(binding)
				w(protocol.Refuse(protocol.CodeConfirmation, "confirmation %s was issued for another state; the stop context changed: confirm again", cmd.Confirmation).Record(cmd.Request))
				continue
			}
			w(protocol.ControlRecord{Record: protocol.RecordControl, Request: cmd.Request, Generation: 1, Controller: "k-1", Mode: client.ModeController})
		}
	}
	return issued
}

// stopEndedUncertainController answers a controller's force-stop commands
// as one whose own stop s-1 of execution e-1 was running when the first
// confirmation was issued and ends uncertain before each of the first
// changes force stops. It returns how many confirmations it issued.
func stopEndedUncertainController(w func(any), cmds <-chan protocol.Command, changes int) int {
	issued, refused := 0, 0
	stopCtx := "s-1/" + protocol.StopStopping
	binding := protocol.Binding{Record: protocol.RecordBinding, Conversation: "pi-take", State: protocol.BindingStopping,
		Execution: "e-1", LastStop: "s-1", Generation: 1, Controller: "k-1", ControllerConnected: true}
	w(binding)
	for cmd := range cmds {
		switch cmd.Type {
		case protocol.CmdIssueConfirmation:
			issued++
			w(protocol.Confirmation{Record: protocol.RecordConfirmation, ID: "cf-" + string(rune('0'+issued)), Request: cmd.Request,
				Operation: cmd.Operation, State: protocol.ConfirmationIssued, Connection: "k-1", Execution: "e-1", Generation: 1,
				StopContext: stopCtx, Intent: "force stop execution e-1"})
		case protocol.CmdAnswerConfirmation:
			w(protocol.Confirmation{Record: protocol.RecordConfirmation, ID: cmd.Confirmation, Request: cmd.Request,
				Operation: protocol.CmdForceStop, State: protocol.ConfirmationAnswered, Connection: "k-1", Execution: "e-1", Generation: 1, StopContext: stopCtx})
		case protocol.CmdForceStop:
			if refused < changes {
				refused++
				stopCtx = "binding/" + protocol.BindingUncertain
				if refused > 1 {
					stopCtx = "s-3/" + protocol.StopStopping
				}
				binding.State = protocol.BindingUncertain
				w(binding)
				w(protocol.Refuse(protocol.CodeConfirmation, "confirmation %s was issued for another state; the stop context changed: confirm again", cmd.Confirmation).Record(cmd.Request))
				continue
			}
			w(protocol.Receipt{Record: protocol.RecordReceipt, ID: "r-1", Request: cmd.Request, Command: protocol.CmdForceStop,
				State: protocol.ReceiptStopped, Stop: "s-2", Execution: "e-1"})
		}
	}
	return issued
}

// fakeSession is a verb session on a socket served by serve, which
// writes records with w and reads the client's commands from cmds.
func fakeSession(t *testing.T, serve func(w func(any), cmds <-chan protocol.Command)) *session {
	t.Helper()
	path := filepath.Join(t.TempDir(), "conv.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		r := bufio.NewReader(conn)
		if _, err := r.ReadBytes('\n'); err != nil { // the hello
			return
		}
		w := func(v any) {
			line, err := protocol.Line(v)
			if err == nil {
				conn.Write(line)
			}
		}
		w(protocol.Welcome{Record: protocol.RecordWelcome, Conversation: "pi-take", Connection: "k-1", Mode: client.ModeObserver, Server: "fake", Protocol: 1})
		cmds := make(chan protocol.Command)
		go func() {
			defer close(cmds)
			for {
				line, err := r.ReadBytes('\n')
				if err != nil {
					return
				}
				var cmd protocol.Command
				if json.Unmarshal(line, &cmd) == nil {
					cmds <- cmd
				}
			}
		}()
		serve(w, cmds)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, path, client.Options{Name: "mosaicctl test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	s := &session{id: "pi-take", c: cl, out: io.Discard}
	s.tape = record(cl, nil)
	if _, err := cl.WaitBound(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}
