package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/mosaic-agents/mosaic/client"
	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/terminal"
	"github.com/urfave/cli/v2"
)

func queueCommand() *cli.Command {
	return &cli.Command{
		Name:      "queue",
		Usage:     "list the prompts queued in a conversation, or cancel, edit or resume them",
		ArgsUsage: "ID | cancel ID ITEM | edit ID ITEM TEXT|- | resume ID",
		Description: "`queue ID` lists the waiting items in order, then the newest finished ones: id, state,\n" +
			"revision and text; a paused queue (after an interrupt or a restart) says why.\n" +
			"`queue cancel ID ITEM` and `queue edit ID ITEM TEXT` act on one queued item, compare-and-set\n" +
			"on the revision just read (or --revision); `queue resume ID` sends a paused queue on.\n" +
			"Each acting form needs control (--take). Exit 0 done, 2 refused (docs/cli.md).",
		Flags: verbFlags(&cli.IntFlag{Name: "revision", Usage: "cancel or edit only if the item is still at revision `N`", DefaultText: "the revision just read"}),
		Action: oneShot(func(ctx context.Context, c *cli.Context) error {
			switch first := c.Args().First(); first {
			case "cancel":
				return runQueueCancel(ctx, c)
			case "edit":
				return runQueueEdit(ctx, c)
			case "resume":
				return runQueueResume(ctx, c)
			default:
				// A lone word is read as a mistyped id, as every verb
				// reads its argument; a word followed by more can only
				// be a sub-verb, and "wants one id, got 2" would hide
				// which word was wrong.
				if c.NArg() > 1 && !conversations.ValidID(first) {
					return usageError("unknown queue command %s: `mosaicctl queue` takes ID, %s; see `mosaicctl queue --help`",
						strconv.Quote(first), queueForms)
				}
			}
			return runQueueList(ctx, c)
		}),
	}
}

// queueSubVerbs are the acting forms of `queue`, its first argument.
var queueSubVerbs = []string{"cancel", "edit", "resume"}

// queueFormUsage describes each acting form as completions show it. They are no
// urfave/cli subcommands: `queue ID` lists, so the first argument is an id
// or a sub-verb, which the action tells apart.
var queueFormUsage = map[string]string{
	"cancel": "cancel one queued item (ID ITEM)",
	"edit":   "replace a queued item's text (ID ITEM TEXT|-)",
	"resume": "send a paused queue on (ID)",
}

// queueForms lists the acting forms as the refusal of an unknown one names them.
const queueForms = "`cancel ID ITEM`, `edit ID ITEM TEXT|-` or `resume ID`"

// queueOf waits until the tape holds the queue record the controller
// sends every connection after the binding. The client's state may have
// it (or an observed answer's) before the tape does: waiting on the
// tape is what makes --json print the record before the verb ends.
func (s *session) queueOf(ctx context.Context) (*protocol.Queue, error) {
	i := 0
	u, err := s.tape.find(ctx, &i, func(u client.Update) bool { return u.Queue != nil })
	if err != nil {
		return nil, fmt.Errorf("wait for the queue: %w", err)
	}
	if q := s.c.State().Queue; q != nil && q.Revision >= u.Queue.Revision {
		return q, nil
	}
	return u.Queue, nil
}

func runQueueList(ctx context.Context, c *cli.Context) error {
	s, err := startVerb(ctx, c, "queue")
	if err != nil {
		return err
	}
	defer s.close()
	q, err := s.queueOf(ctx)
	if err != nil {
		return err
	}
	printQueue(s, q)
	return nil
}

// printQueue writes the queue as a table (nothing with --json: the record
// itself was printed).
func printQueue(s *session, q *protocol.Queue) {
	if q.NotPaused {
		// A resume of a queue that was not paused is not refused (a
		// script may resume when unsure), but it lifted nothing: say so
		// before the table, which alone would read as a resume.
		fmt.Fprintln(s.out, "not paused: nothing to resume; queued items are sent in order under this control")
	}
	if q.Paused {
		fmt.Fprintf(s.out, "paused: %s\n", terminal.SanitizeLine(q.PauseReason))
	}
	if len(q.Items) == 0 {
		fmt.Fprintln(s.out, "the queue is empty")
		return
	}
	w := tabwriter.NewWriter(s.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ITEM\tSTATE\tREV\tTEXT")
	for _, it := range q.Items {
		text := it.Text
		switch {
		case text == "" && it.Reason != "":
			text = "(" + it.Reason + ")"
		case text == "" && it.Digest != "" && it.State == protocol.ReceiptAcknowledged:
			// A finished item keeps only its text's digest (--json
			// shows it): the transcript holds what was sent.
			text = "(sent: its text is in the transcript, `mosaicctl history`)"
		case text == "" && it.Digest != "":
			text = "(finished: its text is not kept; --json shows its sha256)"
		}
		if i := strings.IndexByte(text, '\n'); i >= 0 {
			text = text[:i] + " …"
		}
		if len(text) > 72 {
			cut := 72
			for cut > 0 && !utf8.RuneStart(text[cut]) {
				cut-- // never half a character: it would show as <0xE6>
			}
			text = text[:cut] + "…"
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\n", it.ID, it.State, it.Revision, terminal.SanitizeLine(text))
	}
	w.Flush()
}

// itemArgs returns the item (argument 2) with the revision to act on:
// --revision, or the one the queue record shows now.
func itemArgs(ctx context.Context, c *cli.Context, s *session) (string, int, error) {
	item := c.Args().Get(2)
	if c.IsSet("revision") {
		return item, c.Int("revision"), nil
	}
	q, err := s.queueOf(ctx)
	if err != nil {
		return "", 0, err
	}
	for _, it := range q.Items {
		if it.ID == item {
			return item, it.Revision, nil
		}
	}
	return "", 0, protocol.Refuse(protocol.CodeUnknownItem, "the queue shows no item %s; see `mosaicctl queue %s`", strconv.Quote(item), s.id)
}

// subArgs checks a sub-verb's arguments (the sub-verb itself first).
func subArgs(c *cli.Context, n int, what string) error {
	if id := c.Args().Get(1); c.NArg() > 1 && !conversations.ValidID(id) {
		return notAnID(id)
	}
	if c.NArg() != n {
		return usageError("`mosaicctl queue %s` wants %s, got %d arguments", c.Args().First(), what, c.NArg()-1)
	}
	return nil
}

func runQueueCancel(ctx context.Context, c *cli.Context) error {
	if err := subArgs(c, 3, "a conversation id and an item id"); err != nil {
		return err
	}
	return queueAct(ctx, c, true, func(s *session, item string, rev int) (*protocol.Queue, error) {
		return s.c.CancelQueued(ctx, item, rev)
	})
}

func runQueueEdit(ctx context.Context, c *cli.Context) error {
	if err := subArgs(c, 4, "a conversation id, an item id and the new text (or - for standard input)"); err != nil {
		return err
	}
	text, err := promptText(c.Args().Get(3), os.Stdin)
	if err != nil {
		return err
	}
	return queueAct(ctx, c, true, func(s *session, item string, rev int) (*protocol.Queue, error) {
		return s.c.EditQueued(ctx, item, rev, text)
	})
}

func runQueueResume(ctx context.Context, c *cli.Context) error {
	if err := subArgs(c, 2, "a conversation id"); err != nil {
		return err
	}
	return queueAct(ctx, c, false, func(s *session, _ string, _ int) (*protocol.Queue, error) {
		q, err := s.c.ResumeQueue(ctx)
		if err == nil && !q.NotPaused {
			// The table shows the items still queued: dispatch follows
			// the reply, so say what the resume did.
			fmt.Fprintln(s.out, "resumed: queued items are sent in order under this control")
		}
		return q, err
	})
}

// queueAct connects to the conversation named by argument 1, takes
// control when asked, and runs one queue command.
func queueAct(ctx context.Context, c *cli.Context, onItem bool, act func(*session, string, int) (*protocol.Queue, error)) error {
	s, err := dialID(ctx, c, "queue "+c.Args().First(), c.Args().Get(1))
	if err != nil {
		return err
	}
	defer s.close()
	if err := s.bind(ctx); err != nil {
		return err
	}
	if err := s.take(ctx, c, false, consent{}); err != nil {
		return err
	}
	item, rev := "", 0
	if onItem {
		if item, rev, err = itemArgs(ctx, c, s); err != nil {
			return err
		}
	}
	q, err := act(s, item, rev)
	if s.got(err) != nil {
		return err
	}
	printQueue(s, q)
	return nil
}
