package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/mosaic-agents/mosaic/client"
	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/terminal"
	"github.com/urfave/cli/v2"
	"golang.org/x/term"
)

func promptCommand() *cli.Command {
	return &cli.Command{
		Name:      "prompt",
		Usage:     "send one prompt as the controller and print the answer",
		ArgsUsage: "ID TEXT|-",
		Description: "Queues TEXT (or standard input, with -) exactly as given, durably, behind any prompts already\n" +
			"waiting; waits for its turn to settle and prints the text of each assistant message.\n" +
			"Exit 0 answered, 2 refused (nothing queued), 3 outcome unknown, 4 the engine refused it,\n" +
			"the turn was stopped, or the item left the queue unsent (docs/cli.md).",
		Flags:  verbFlags(&cli.BoolFlag{Name: "no-wait", Usage: "print the receipt and exit as soon as the prompt is queued"}),
		Action: oneShot(runPrompt),
	}
}

func runPrompt(ctx context.Context, c *cli.Context) (err error) {
	if id := c.Args().First(); c.NArg() > 0 && !conversations.ValidID(id) {
		return notAnID(id)
	}
	if c.NArg() != 2 {
		return usageError("`mosaicctl prompt` wants a conversation id and one text argument, got %d arguments: quote the text, "+
			"put `--` before a text that starts with -, or give - to read it from standard input", c.NArg())
	}
	text, err := promptText(c.Args().Get(1), os.Stdin)
	if err != nil {
		return err
	}
	s, err := dialVerb(ctx, c, "prompt")
	if err != nil {
		return err
	}
	defer s.close()
	// An engine that is gone says why, after the refusal or verdict.
	defer func() { err = withEngineEnd(err, s.c.State().Binding) }()
	// Events reach only a connection that observed; the seam says whether
	// a turn that was running at the cut will settle first.
	o, err := s.c.Observe(ctx)
	if s.got(err) != nil {
		return err
	}
	from := 0
	if _, err := s.tape.find(ctx, &from, func(u client.Update) bool {
		return u.Observed != nil && u.Observed.Request == o.Request
	}); err != nil {
		return fmt.Errorf("observe: %w", err)
	}
	if err := s.launched(ctx); err != nil {
		return err
	}
	if err := s.take(ctx, c, false, consent{}); err != nil {
		return err
	}
	rc, err := s.c.Enqueue(ctx, text)
	if s.got(err) != nil {
		return err
	}
	if c.Bool("no-wait") {
		fmt.Fprintf(s.out, "%s: receipt %s, item %s, execution %s, generation %d\n", rc.State, rc.ID, rc.Item, rc.Execution, rc.Generation)
		return nil
	}
	if rc, err = s.turn(ctx, rc); err != nil {
		return err
	}
	switch rc.State {
	case protocol.ReceiptFailed:
		return unsettled(rc.State, "the engine refused the prompt (receipt %s): %s", rc.ID, terminal.SanitizeLine(rc.Evidence))
	case protocol.ReceiptDeliveryUnknown:
		return unknown("the prompt was written to the engine and its delivery is not known (receipt %s); see `mosaicctl attach %s`, never send it again as new", rc.ID, s.id)
	case protocol.ReceiptCancelled, protocol.ReceiptDispatchRefused, protocol.ReceiptDraft, protocol.ReceiptRecoveryFailed:
		return unsettled(rc.State, "queue item %s left the queue unsent: %s (receipt %s)", rc.Item, terminal.SanitizeLine(rc.Reason), rc.ID)
	}
	return s.answer(ctx, from, rc)
}

// turn waits for a queued prompt's receipt to leave the queue: the
// controller sends this connection every later revision of it.
func (s *session) turn(ctx context.Context, rc *protocol.Receipt) (*protocol.Receipt, error) {
	i := 0
	for client.Waiting(rc.State) {
		u, err := s.tape.next(ctx, &i)
		if err != nil {
			return nil, unknown("prompt queued as item %s (receipt %s), then %v before it was sent; see `mosaicctl queue %s`, never send it again as new",
				rc.Item, rc.ID, err, s.id)
		}
		if r := u.Receipt; r != nil && r.Request == rc.Request && r.Revision > rc.Revision {
			rc = r
		}
	}
	return rc, nil
}

// launched waits while the engine is launching: admission opens once it
// has loaded the pinned session (a prompt before then refuses preflight).
func (s *session) launched(ctx context.Context) error {
	i := 0
	for {
		if b := s.c.State().Binding; b == nil || b.State != protocol.BindingLaunching {
			return nil
		}
		if _, err := s.tape.find(ctx, &i, func(u client.Update) bool { return u.Binding != nil }); err != nil {
			return fmt.Errorf("wait for the engine to launch: %w", err)
		}
	}
}

// answer follows the stream from tape index i until the prompt's turn
// settles, printing the final text of each assistant message. Events up
// to the receipt's afterSeq belong to turns before it: the controller
// sends an item only once the turn before it settled.
func (s *session) answer(ctx context.Context, i int, rc *protocol.Receipt) error {
	var stop *protocol.Stop
	aborted, truncated := "", false
	// noted holds the native decisions already named: a takeover (the
	// `approve --take` that answers it) re-projects a pending decision
	// under a new approval id, and naming it again then would read as a
	// second approval, or as the answer not taken.
	noted := map[string]bool{}
	for {
		u, err := s.tape.next(ctx, &i)
		if err != nil {
			return unknown("the prompt was acknowledged (receipt %s), then %v before its turn settled; see `mosaicctl attach %s`",
				rc.ID, err, s.id)
		}
		switch {
		case u.Event != nil && u.Event.Execution == rc.Execution:
			e := u.Event
			if e.Seq <= rc.AfterSeq {
				continue
			}
			switch {
			case e.Kind == protocol.EventMessageEnd && e.Role == "assistant":
				s.printText(e.Content)
				truncated = truncated || e.Truncated
				if e.StopReason == "error" || e.StopReason == "aborted" {
					aborted = e.StopReason
				}
			case e.Kind == protocol.EventRunSettled && stop != nil:
				return unsettled("interrupted", "the turn was ended by %s %s (%s)", stop.Kind, stop.ID, stop.State)
			case e.Kind == protocol.EventRunSettled && aborted != "":
				return unsettled(aborted, "the turn ended with stop reason %s (receipt %s)", aborted, rc.ID)
			case e.Kind == protocol.EventRunSettled && truncated:
				return unsettled("truncated", "the answer is longer than the live stream carries: what was printed stops where it was cut; the whole text is in the history (`mosaicctl attach %s`)", s.id)
			case e.Kind == protocol.EventRunSettled:
				return nil
			}
		case u.Stop != nil && u.Stop.Execution == rc.Execution:
			stop = u.Stop
		case u.Approval != nil && u.Approval.Execution == rc.Execution && u.Approval.State == protocol.ApprovalPending:
			// The turn waits on a native dialog: say how to answer it,
			// once per decision (the answer names the decision, which
			// every projection of it shares).
			if !noted[u.Approval.Decision] {
				noted[u.Approval.Decision] = true
				s.note("mosaicctl: the turn waits for approval %s (%s): see `mosaicctl approve %s`, answer with `mosaicctl approve --take %s %s --choice LABEL`%s",
					u.Approval.ID, u.Approval.Form, s.id, s.id, u.Approval.Decision, yesNo(*u.Approval))
			}
		case u.Binding != nil && gone(u.Binding, rc.Execution):
			return unsettled("stopped", "the turn did not settle: the binding is %s (%s)", u.Binding.State,
				terminal.SanitizeLine(u.Binding.AdmissionReason))
		case u.Notice != nil && u.Notice.Kind == protocol.NoticeLostPlace:
			return unknown("events of the turn were lost (the connection fell behind; receipt %s); see `mosaicctl attach %s`", rc.ID, s.id)
		}
	}
}

// gone reports whether b says execution can no longer settle a turn.
func gone(b *protocol.Binding, execution string) bool {
	switch b.State {
	case protocol.BindingStopping, protocol.BindingStopped, protocol.BindingUncertain, protocol.BindingIdle:
		return true
	}
	return b.Execution != execution
}

// printText writes the text blocks of an assistant message, raw for a
// pipe (a script wants the exact text) and made inert for a terminal.
func (s *session) printText(content []protocol.Block) {
	var parts []string
	for _, b := range content {
		if b.Type == "text" && b.Text != "" {
			parts = append(parts, b.Text)
		}
	}
	text := strings.Join(parts, "\n")
	if text == "" {
		return
	}
	if f, ok := s.out.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		text = strings.Join(terminal.SanitizeBody(text), "\n")
	}
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	io.WriteString(s.out, text)
}
