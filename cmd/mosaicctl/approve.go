package main

import (
	"slices"

	"context"
	"fmt"
	"github.com/mosaic-agents/mosaic/engine"

	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/terminal"
	"github.com/urfave/cli/v2"
)

func approveCommand() *cli.Command {
	return &cli.Command{
		Name:      "approve",
		Usage:     "list the conversation's open native dialogs, or answer one as the controller",
		ArgsUsage: "ID [APPROVAL]",
		Description: "Without --choice, --yes or --no: list every open decision (pending, disabled, uncertain) with its\n" +
			"exact title, message and choices, shown inert (escapes visible). With one: answer APPROVAL (its\n" +
			"approval id or native decision id; optional when exactly one is pending) with exactly one of its\n" +
			"choices: --choice LABEL byte for byte, or --yes/--no for a confirm and for a Claude tool's\n" +
			"permission request (--yes allows once, --no denies). Needs control (--take).\n" +
			"Exit 0 answered or listed, 2 refused (approval-choice, approval-closed, approval-conflict, ...),\n" +
			"3 outcome unknown (docs/cli.md).",
		Flags: verbFlags(
			&cli.StringFlag{Name: "choice", Usage: "answer with exactly this `LABEL` (a select's label, or true/false for a confirm)"},
			&cli.BoolFlag{Name: "yes", Usage: "answer a confirm true, or allow a Claude tool use once"},
			&cli.BoolFlag{Name: "no", Usage: "answer a confirm false, or deny a Claude tool use"},
		),
		Action: oneShot(runApprove),
	}
}

func runApprove(ctx context.Context, c *cli.Context) error {
	choice, answering, err := approveChoice(c)
	if err != nil {
		return err
	}
	if c.NArg() < 1 || c.NArg() > 2 {
		return usageError("`mosaicctl approve` wants a conversation id and, to answer, optionally an approval id, got %d arguments; see `mosaicctl approve --help`", c.NArg())
	}
	s, err := dialVerb(ctx, c, "approve")
	if err != nil {
		return err
	}
	defer s.close()
	if err := s.bind(ctx); err != nil {
		return err
	}
	list, err := s.c.Approvals(ctx)
	if s.got(err) != nil {
		return err
	}
	if !answering {
		printApprovals(s, list)
		return nil
	}
	a, err := pickApproval(list, c.Args().Get(1))
	if err != nil {
		return err
	}
	if err := s.take(ctx, c, false, consent{}); err != nil {
		return err
	}
	if c.Bool("take") {
		// The takeover re-projected every open decision: answer the
		// current projection of the same native decision.
		if list, err = s.c.Approvals(ctx); s.got(err) != nil {
			return err
		}
		if a, err = pickApproval(list, a.Decision); err != nil {
			return err
		}
	}
	if permission(a) && (c.Bool("yes") || c.Bool("no")) {
		// A Claude permission request offers allow-once and deny only:
		// --yes allows once, --no denies.
		choice = map[bool]string{true: engine.ChoiceAllowOnce, false: engine.ChoiceDeny}[c.Bool("yes")]
	} else if (c.Bool("yes") || c.Bool("no")) && a.Form != protocol.FormConfirm {
		return protocol.Refuse(protocol.CodeUsage, "--yes and --no answer a confirm; approval %s is a %s: use --choice LABEL", a.ID, a.Form)
	}
	res, err := s.c.Approve(ctx, a.ID, choice, a.Decision)
	if s.got(err) != nil {
		return err
	}
	fmt.Fprintf(s.out, "approval %s (decision %s) %s: %s\n", res.ID, res.Decision, res.State, terminal.SanitizeLine(res.Chosen))
	return nil
}

// permission reports a Claude permission request's approval: a select
// of exactly allow-once and deny (or deny alone).
func permission(a protocol.Approval) bool {
	return a.Form == protocol.FormSelect && len(a.Choices) > 0 && len(a.Choices) <= 2 &&
		slices.Contains(a.Choices, engine.ChoiceDeny) && (len(a.Choices) == 1 || slices.Contains(a.Choices, engine.ChoiceAllowOnce))
}

// approveChoice reads the answer flags: at most one of them.
func approveChoice(c *cli.Context) (choice string, answering bool, err error) {
	n := 0
	for _, f := range []string{"choice", "yes", "no"} {
		if c.IsSet(f) {
			n++
		}
	}
	switch {
	case n > 1:
		return "", false, protocol.Refuse(protocol.CodeUsage, "give one of --choice, --yes and --no")
	case c.Bool("yes"):
		return "true", true, nil
	case c.Bool("no"):
		return "false", true, nil
	case c.IsSet("choice"):
		return c.String("choice"), true, nil
	}
	return "", false, nil
}

// pickApproval finds the decision to answer: by approval or native
// decision id, or the only pending one.
func pickApproval(list []protocol.Approval, want string) (protocol.Approval, error) {
	var pending []protocol.Approval
	for _, a := range list {
		if want != "" && (a.ID == want || a.Decision == want) {
			return a, nil
		}
		if a.State == protocol.ApprovalPending {
			pending = append(pending, a)
		}
	}
	switch {
	case want != "":
		return protocol.Approval{}, protocol.Refuse(protocol.CodeApprovalUnknown, "no open approval %s; list them with `mosaicctl approve ID`", want)
	case len(pending) == 1:
		return pending[0], nil
	case len(pending) == 0:
		// Picked before any takeover: say that nothing moved, and where
		// the open ones (disabled, uncertain) are listed.
		return protocol.Approval{}, protocol.Refuse(protocol.CodeApprovalUnknown,
			"no approval is pending: nothing was answered and control was not taken; `mosaicctl approve ID` lists the open ones")
	}
	return protocol.Approval{}, protocol.Refuse(protocol.CodeUsage, "%d approvals are pending; name one (list them with `mosaicctl approve ID`)", len(pending))
}

// printApprovals lists open decisions with their text made inert: a label
// with a newline or a bidi control is shown escaped, never laid out.
func printApprovals(s *session, list []protocol.Approval) {
	if len(list) == 0 {
		fmt.Fprintln(s.out, "no open approvals")
		return
	}
	for _, a := range list {
		fmt.Fprintf(s.out, "approval %s  decision %s  %s  %s", a.ID, a.Decision, a.Form, a.State)
		if a.Deadline != "" {
			fmt.Fprintf(s.out, "  deadline %s", a.Deadline)
		}
		fmt.Fprintln(s.out)
		fmt.Fprintf(s.out, "  title:   %s\n", terminal.SanitizeLine(a.Title))
		if a.Message != "" {
			fmt.Fprintf(s.out, "  message: %s\n", terminal.SanitizeLine(a.Message))
		}
		for i, ch := range a.Choices {
			fmt.Fprintf(s.out, "  choice %d: %s\n", i+1, terminal.SanitizeLine(ch))
		}
		if a.Reason != "" {
			fmt.Fprintf(s.out, "  reason:  %s\n", terminal.SanitizeLine(a.Reason))
		}
		who := "the controller " + a.Controller
		if a.Controller == "" {
			who = "whoever takes control"
		}
		if a.State == protocol.ApprovalPending {
			fmt.Fprintf(s.out, "  answer:  %s, with `mosaicctl approve --take %s %s --choice LABEL`%s\n", who, s.id, a.ID, yesNo(a))
		}
	}
}

// yesNo names the answer flags besides --choice that approval a takes: a
// confirm's --yes/--no, and a Claude permission request's (--yes allows
// once, --no denies; README's Claude section answers it so).
func yesNo(a protocol.Approval) string {
	switch {
	case a.Form == protocol.FormConfirm:
		return " (or --yes / --no)"
	case permission(a) && slices.Contains(a.Choices, engine.ChoiceAllowOnce):
		return " (or --yes to allow once, --no to deny)"
	case permission(a):
		return " (or --no to deny)"
	}
	return ""
}
