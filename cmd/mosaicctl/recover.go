package main

import (
	"context"
	"fmt"
	"time"

	"github.com/mosaic-agents/mosaic/client"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/urfave/cli/v2"
)

func recoverCommand() *cli.Command {
	return &cli.Command{
		Name:      "recover",
		Usage:     "after a proven stop, check eligibility and launch a new execution on the same session",
		ArgsUsage: "ID",
		Description: "With --take it acquires (recovery) control first. Running recover is the consent to its\n" +
			"confirmation, whose intent it prints. Exit 0 launched (or eligible with --no-launch),\n" +
			"2 refused (stop-proof, not-controller, ...), 3 outcome unknown, 4 the launch ended uncertain.",
		Flags:  verbFlags(&cli.BoolFlag{Name: "no-launch", Usage: "only ask whether a new execution may start; start nothing"}),
		Action: oneShot(runRecover),
	}
}

func runRecover(ctx context.Context, c *cli.Context) error {
	s, err := startVerb(ctx, c, "recover")
	if err != nil {
		return err
	}
	defer s.close()
	if b := s.c.State().Binding; b != nil && b.State != protocol.BindingStopped {
		// Refused before taking control, as the controller would refuse
		// it after: recover follows a proven stop only.
		return protocol.Refuse(protocol.CodeStopProof, "recover needs a stop proven by a cohort or boot proof; the binding is %s: %s", b.State, recoverWayOut(b, s.id))
	}
	how := consent{yes: true, why: "the recover command"}
	if err := s.take(ctx, c, true, how); err != nil {
		return err
	}
	cf, err := s.confirm(ctx, protocol.CmdRecover, how)
	if err != nil {
		return err
	}
	el, err := s.c.Recover(ctx, cf.ID)
	if s.got(err) != nil {
		return err
	}
	fmt.Fprintf(s.out, "eligible: %s after stop %s (proof %s), session %s, leaf %s\n",
		el.ID, el.Stop, el.ProofDigest, orDash(el.SessionID), orDash(el.Leaf))
	if c.Bool("no-launch") {
		return nil
	}
	rc, err := s.c.Launch(ctx, el.ID)
	if s.got(err) != nil {
		return err
	}
	if rc.State != protocol.ReceiptLaunched {
		v := unsettled(rc.State, "the new execution %s did not become active (receipt %s)%s", rc.Execution, rc.ID, reason(rc.Reason))
		return withEngineEnd(v, s.endOf(ctx, rc.Execution))
	}
	fmt.Fprintf(s.out, "launched: execution %s, generation %d (receipt %s)\n", rc.Execution, rc.Generation, rc.ID)
	return nil
}

// recoverWayOut says what to run before recover, by binding state
// (docs/recovery.md has every cause of uncertain).
func recoverWayOut(b *protocol.Binding, id string) string {
	switch b.State {
	case protocol.BindingStopping:
		return "a stop is under way or its proof waits to be recorded: " + orDash(b.AdmissionReason) + "; `mosaicctl status " + id + "` shows when it is stopped"
	case protocol.BindingUncertain:
		return "run `mosaicctl stop --take --yes " + id + "` first: it proves the cohort ended (also when its scope was already stopped or removed), then recover; see docs/recovery.md"
	}
	return "run `mosaicctl stop --take --yes " + id + "` first"
}

// endOf waits a little for the binding that says how execution's engine
// ended (its exit and stderr tail), which the controller publishes beside
// the launch's receipt: a launch that did not become active is explained
// by the engine's last words ("Unknown provider …"), not by the load
// check's "engine connection closed" alone. nil when none comes.
func (s *session) endOf(ctx context.Context, execution string) *protocol.Binding {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	i := 0
	ends := func(b *protocol.Binding) bool {
		return b != nil && b.EngineEnd != nil && b.EngineEnd.Execution == execution
	}
	// The exit's binding carries the stderr; a failed load check may be
	// published first, without it.
	u, err := s.tape.find(ctx, &i, func(u client.Update) bool { return ends(u.Binding) && u.Binding.EngineEnd.Status != "" })
	if err == nil {
		return u.Binding
	}
	if b := s.c.State().Binding; ends(b) {
		return b
	}
	return nil
}
