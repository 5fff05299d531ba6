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

func reason(r string) string {
	if r == "" {
		return ""
	}
	return ": " + r
}
