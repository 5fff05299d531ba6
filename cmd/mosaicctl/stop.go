package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/terminal"
	"github.com/urfave/cli/v2"
	"golang.org/x/term"
)

func stopCommand() *cli.Command {
	return &cli.Command{
		Name:      "stop",
		Usage:     "force stop the engine's whole cohort, after showing exactly what will be stopped",
		ArgsUsage: "ID",
		Description: "Needs control (--take; without it, refused not-controller naming every fix). Shows the\n" +
			"scope, its processes and the execution, then asks y/N on a terminal; --yes consents for\n" +
			"scripts; without either it refuses confirmation-required. Prints the stop record\n" +
			"and its proof; --proof FILE refuses a symlink before stopping and replaces a regular FILE whole.\n" +
			"Exit 0 stopped with a proof, 2 refused, 3 outcome unknown, 4 uncertain or the proof file not written.",
		Flags: verbFlags(
			&cli.BoolFlag{Name: "yes", Usage: "consent without asking (scripts)"},
			&cli.StringFlag{Name: "proof", Usage: "write the stop's proof to `FILE`, for `mosaicctl proof verify FILE`"},
		),
		Action: oneShot(runStop),
	}
}

func runStop(ctx context.Context, c *cli.Context) error {
	if file := c.String("proof"); file != "" {
		if err := checkProofFile(file); err != nil {
			return err
		}
	}
	s, err := startVerb(ctx, c, "stop")
	if err != nil {
		return err
	}
	defer s.close()
	if b := s.c.State().Binding; b != nil && b.State == protocol.BindingStopped {
		// Refused before taking control: a control grab that ends in the
		// controller's own refusal would only revoke someone.
		return protocol.Refuse(protocol.CodeFenced, "already stopped with a proof (stop %s); `mosaicctl recover --take %s` starts it again", orDash(b.LastStop), s.id)
	}
	how := consent{yes: c.Bool("yes"), why: "--yes"}
	if err := consentBeforeTake(s.id, c.Bool("take"), how.yes, term.IsTerminal(int(os.Stdin.Fd())), s.c.State().Binding); err != nil {
		return err
	}
	// An orphan found at restart or an uncertain binding fences takeover:
	// recovery control is the way to stop it.
	if err := s.take(ctx, c, true, how); err != nil {
		return err
	}
	rc, err := s.forceStop(ctx, how)
	if err != nil {
		return err
	}
	st := s.report(ctx, rc)
	if file := c.String("proof"); file != "" {
		if st == nil || len(st.Proof) == 0 {
			fmt.Fprintf(os.Stderr, "mosaicctl: no proof to write to %s: the stop ended %s\n", file, rc.State)
		} else if err := writeProofFile(file, append(st.Proof, '\n')); err != nil {
			return proofNotWritten(err, rc.Stop, s.id)
		} else {
			fmt.Fprintf(s.out, "  proof written to %s (mosaicctl proof verify %s)\n", file, file)
		}
	}
	if rc.State != protocol.ReceiptStopped && st != nil && st.State == "stopping" {
		// The controller holds a proof the claim store refused: the
		// stop is not over, it ends stopped once the revision is written.
		return unknown("the force stop is still stopping (stop %s, receipt %s)%s; `mosaicctl status %s` shows when it is stopped",
			rc.Stop, rc.ID, reason(rc.Reason), s.id)
	}
	if rc.State != protocol.ReceiptStopped {
		return unsettled(rc.State, "the force stop ended %s: nothing proves the cohort is gone (stop %s, receipt %s)%s",
			rc.State, rc.Stop, rc.ID, reason(rc.Reason))
	}
	return nil
}

// forceStop confirms the force stop and asks for it (confirmed says when
// it confirms once more; a stop that ended stopped meanwhile is then
// refused "already stopped"). A force stop refused for one already
// running, or already stopped, returns that stop's outcome.
func (s *session) forceStop(ctx context.Context, how consent) (*protocol.Receipt, error) {
	var rc *protocol.Receipt
	used, err := s.confirmed(ctx, protocol.CmdForceStop, how, func(id string) (err error) {
		rc, err = s.c.ForceStop(ctx, id)
		return err
	})
	switch {
	case err == nil:
		return rc, nil
	case !used:
		return nil, err
	}
	return s.joinRunningStop(ctx, err)
}

// report prints a stop's receipt and its stop record: state, proof,
// effects left uncertain, approval disposition. It returns the record.
func (s *session) report(ctx context.Context, rc *protocol.Receipt) *protocol.Stop {
	st := s.stopRecord(ctx, rc.Stop)
	fmt.Fprintf(s.out, "%s: execution %s (stop %s, receipt %s)\n", rc.State, orDash(rc.Execution), orDash(rc.Stop), rc.ID)
	if st == nil {
		return nil
	}
	if st.Reason != "" && st.State != protocol.ReceiptStopped {
		fmt.Fprintf(s.out, "  reason: %s\n", terminal.SanitizeLine(st.Reason))
	}
	if st.ProofDigest != "" {
		fmt.Fprintf(s.out, "  proof: %s\n", st.ProofDigest)
	}
	if e := st.Effects; e != nil {
		fmt.Fprintf(s.out, "  effects: %s, %d tool calls completed", e.Disposition, e.Completed)
		for _, u := range e.Uncertain {
			// A stop concluded with no stream to read names no call.
			call := cmp.Or(strings.TrimSpace(terminal.SanitizeLine(u.Tool)+" "+u.CallID), "tool calls not seen")
			fmt.Fprintf(s.out, "; uncertain: %s (%s)", call, u.Reason)
		}
		fmt.Fprintln(s.out)
	}
	if st.ApprovalDisposition != "" {
		fmt.Fprintf(s.out, "  approvals: %s\n", st.ApprovalDisposition)
	}
	return st
}

// stopRecord returns the latest revision of stop id read on this
// connection: its transitions are broadcast before the receipt naming it.
func (s *session) stopRecord(ctx context.Context, id string) *protocol.Stop {
	if id == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s.tape.caughtUp(ctx, s.replies)
	var last *protocol.Stop
	for _, u := range s.tape.all() {
		if u.Stop != nil && u.Stop.ID == id {
			last = u.Stop
		}
	}
	return last
}

// consentBeforeTake refuses, before anything is sent, a stop that can
// only be refused, naming every fix it needs at once. Without --take it
// is not-controller (every connection starts as an observer, and the
// controller issues a force-stop confirmation only to its controller),
// and when nobody could consent either (no --yes, standard input not a
// terminal) the same refusal names --yes too, so the user does not fail
// twice. With --take and no way to consent it is confirmation-required
// before the takeover, which would raise the generation and revoke
// whoever holds control (an attached terminal) for a stop that can only
// be refused. b is the binding of the welcome: what would have been
// stopped.
func consentBeforeTake(id string, take, yes, tty bool, b *protocol.Binding) error {
	consent := yes || tty
	if take && consent {
		return nil
	}
	what := "the engine's cohort"
	if b != nil && b.Scope != "" {
		what = fmt.Sprintf("execution %s: every process in %s", terminal.SanitizeLine(orDash(b.Execution)), terminal.SanitizeLine(b.Scope))
	}
	switch {
	case !take && !consent:
		return protocol.Refuse(protocol.CodeNotController,
			"force-stop needs control and consent: pass --take to take control first and --yes to consent (standard input is not a terminal to ask y/N on): "+
				"`mosaicctl stop --take --yes %s`; nothing was done; it would force stop %s", id, what)
	case !take:
		how := "`mosaicctl stop --take --yes " + id + "`"
		if !yes {
			how = "`mosaicctl stop --take " + id + "` (it asks y/N here), or " + how
		}
		return protocol.Refuse(protocol.CodeNotController,
			"force-stop needs control: pass --take to take control first: %s; nothing was done; it would force stop %s", how, what)
	}
	return protocol.Refuse(protocol.CodeConfirmationRequired,
		"force-stop needs consent: pass --yes (`mosaicctl stop --take --yes %s`), or run on a terminal to answer y/N; "+
			"nothing was done and control was not taken; it would force stop %s", id, what)
}
