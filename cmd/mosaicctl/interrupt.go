package main

import (
	"context"

	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/urfave/cli/v2"
)

func interruptCommand() *cli.Command {
	return &cli.Command{
		Name:      "interrupt",
		Usage:     "stop the running turn as the controller and print how it settled",
		ArgsUsage: "ID",
		Description: "Exit 0 reconciled (the turn ended and was reconciled with a turn proof), 2 refused\n" +
			"(no-turn, not-controller, ...), 3 outcome unknown, 4 uncertain (docs/cli.md).",
		Flags:  verbFlags(),
		Action: oneShot(runInterrupt),
	}
}

func runInterrupt(ctx context.Context, c *cli.Context) error {
	s, err := startVerb(ctx, c, "interrupt")
	if err != nil {
		return err
	}
	defer s.close()
	return s.interrupt(ctx, c)
}

// interrupt is the verb on a bound connection: refused when nothing runs,
// else take control when asked, interrupt and report.
func (s *session) interrupt(ctx context.Context, c *cli.Context) error {
	if err := idleRefusal(s.c.State().Binding, s.id); err != nil {
		return err
	}
	if err := s.take(ctx, c, false, consent{}); err != nil {
		return err
	}
	rc, err := s.c.Interrupt(ctx)
	if s.got(err) != nil {
		return err
	}
	s.report(ctx, rc)
	if rc.State != protocol.ReceiptReconciled {
		return unsettled(rc.State, "the interrupt ended %s (stop %s, receipt %s)%s", rc.State, rc.Stop, rc.ID, reason(rc.Reason))
	}
	return nil
}

// idleRefusal refuses no-turn, before --take takes control, when the
// binding b says nothing runs: the controller would refuse the interrupt
// no-turn after the takeover, which had revoked whoever held control (an
// attached terminal) for nothing.
//
// The binding is the one the controller computed for this connection
// when it said welcome, from the engine's turn state at that moment, not
// a copy kept since. A turn can start after it (a queued item, another
// client's prompt, an extension's run); that turn began after this
// interrupt was asked for, exactly as one starting right after the
// controller's own no-turn refusal would, so the refusal is as true as
// the controller's. Only an idle engine on an active binding is refused
// here: busy, fenced, waiting-for-approval and the other binding states
// go to the controller, which decides on the state it holds, and a turn
// that settles between the welcome and the interrupt then still costs a
// takeover, rightly, since it ran when the interrupt was asked for.
func idleRefusal(b *protocol.Binding, id string) error {
	if b == nil || b.State != protocol.BindingActive || b.EngineState != protocol.EngineIdle {
		return nil
	}
	return protocol.Refuse(protocol.CodeNoTurn,
		"nothing is running to interrupt (the engine was idle when this connected); nothing was done, control was not taken; `mosaicctl status %s` shows the conversation", id)
}

func reason(r string) string {
	if r == "" {
		return ""
	}
	return ": " + r
}
