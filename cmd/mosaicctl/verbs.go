package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/mosaic-agents/mosaic/client"
	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/terminal"
	"github.com/urfave/cli/v2"
	"golang.org/x/term"
)

// Exit statuses of the one-shot verbs beyond 0 (done), 1 (an error: nothing
// was decided) and 2 (a refusal: nothing was done; main's report). Each is
// written down in docs/cli.md; scripts branch on them.
const (
	// exitUnknown: a command was sent and its outcome is unknown (the
	// connection ended, or --timeout passed, before the reply or before
	// the turn settled). Never resend it as new.
	exitUnknown = 3
	// exitUnsettled: the command was carried out but did not end as asked:
	// the engine refused the prompt, the turn was stopped or aborted, a
	// stop ended uncertain, a launch did not become active.
	exitUnsettled = 4
)

// codeOutcomeUnknown is a verdict, not a refusal: it never travels on the
// socket, so it stays here with the exit statuses (refusal codes live in
// protocol).
const codeOutcomeUnknown = "outcome-unknown"

// connectTimeout bounds the dial and the hello. Socket activation starts the
// controller, which launches the engine before it says welcome.
const connectTimeout = time.Minute

// verdict ends a verb with exitUnknown or exitUnsettled. Its code goes first
// on stderr, as a refusal's does, so a script matches both the same way.
type verdict struct {
	status  int
	code    string
	message string
}

func (v *verdict) Error() string { return v.code + ": " + v.message }

func unsettled(code, format string, args ...any) *verdict {
	return &verdict{status: exitUnsettled, code: code, message: fmt.Sprintf(format, args...)}
}

func unknown(format string, args ...any) *verdict {
	return &verdict{status: exitUnknown, code: codeOutcomeUnknown, message: fmt.Sprintf(format, args...)}
}

// verbFlags are the flags every one-shot verb takes.
func verbFlags(extra ...cli.Flag) []cli.Flag {
	return append([]cli.Flag{
		&cli.BoolFlag{Name: "take", Usage: "take control first (a fresh connection is an observer; without --take a command that needs control refuses not-controller)"},
		&cli.BoolFlag{Name: "json", Usage: "print every record the controller sends (except the history page) as JSON lines"},
		&cli.DurationFlag{Name: "timeout", Usage: "give up after `DURATION` (0: never); a command already sent then ends outcome unknown"},
		&cli.StringFlag{Name: "socket", Usage: "connect to `PATH` instead of the conversation's socket"},
	}, extra...)
}

// oneShot runs a verb and turns a lost outcome or a verdict into its exit
// status; refusals and other errors go back to main's report (2 and 1).
func oneShot(run func(context.Context, *cli.Context) error) cli.ActionFunc {
	return func(c *cli.Context) error {
		if d := c.Duration("timeout"); d < 0 {
			return usageError("--timeout %s is negative: give a duration such as 30s or 5m, or 0 to wait for ever", d)
		}
		ctx, stop := signalContext(c.Context)
		defer stop()
		if d := c.Duration("timeout"); d > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeoutCause(ctx, d, timeoutError{d})
			defer cancel()
		}
		err := run(ctx, c)
		verb, id := verbAndID(c)
		var v *verdict
		var lost *client.OutcomeError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &v):
		case errors.As(err, &lost):
			v = unknown("%v; see what happened with `mosaicctl attach %s`, never send it again as new", err, id)
		default:
			return timeoutHint(ctx, withHint(err, verb, id))
		}
		fmt.Fprintf(os.Stderr, "mosaicctl: %s: %s\n", v.code, v.message)
		os.Exit(v.status)
		return nil
	}
}

// signalContext is ctx ended by SIGINT or SIGTERM, with a signalError as
// its cause, so a verb's message reads "then a terminate signal arrived
// before its turn settled" (signal.NotifyContext's cause reads
// "terminated signal received").
func signalContext(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case sig := <-ch:
			cancel(signalError{sig})
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		cancel(context.Canceled)
	}
}

// signalError is why a verb's context ends at a signal. It unwraps to
// context.Canceled, as a cancelled context's error is.
type signalError struct{ sig os.Signal }

func (e signalError) Error() string {
	if e.sig == os.Interrupt {
		return "an interrupt signal (Ctrl-C) arrived"
	}
	return "a terminate signal arrived"
}
func (e signalError) Unwrap() error { return context.Canceled }

// timeoutError is why a verb's context ends at --timeout: errors then say
// "the --timeout of 2s passed" where Go says "context deadline exceeded".
// It unwraps to context.DeadlineExceeded, so errors.Is still sees that.
type timeoutError struct{ d time.Duration }

func (e timeoutError) Error() string { return fmt.Sprintf("the --timeout of %s passed", e.d) }
func (e timeoutError) Unwrap() error { return context.DeadlineExceeded }

// timeoutHint adds what to do to an error of a verb that gave up at
// --timeout before any command's outcome was lost (those end outcome
// unknown, saying how to see what happened); a refusal is the
// controller's answer, not the timeout's doing.
func timeoutHint(ctx context.Context, err error) error {
	var te timeoutError
	var r *protocol.Refusal
	if errors.As(err, &r) || !errors.As(context.Cause(ctx), &te) {
		return err
	}
	return fmt.Errorf("%w; run it again with a longer --timeout (--timeout 0 waits without limit)", err)
}

// verbAndID names the verb a hint repeats and the conversation it acts
// on: `queue`'s acting forms read the id after their sub-verb, and a hint
// built from the first argument would name the sub-verb as the id.
func verbAndID(c *cli.Context) (verb, id string) {
	if sub := c.Args().First(); c.Command.Name == "queue" && slices.Contains(queueSubVerbs, sub) {
		return "queue " + sub, c.Args().Get(1)
	}
	return c.Command.Name, c.Args().First()
}

// session is one verb's connection: the client, the tape of everything it
// received, and how to print.
type session struct {
	id   string
	c    *client.Client
	tape *tape
	out  io.Writer // human output: nothing with --json
	// notes is where a verb's notes beside its output go (nil: standard
	// error), so a test can read them.
	notes io.Writer
	// replies counts the replies (results and refusals) the command
	// methods returned, so close can wait until the tape has them.
	replies int
}

// dialVerb connects to the conversation named by the first argument, as an
// observer, and starts recording what the controller sends.
func dialVerb(ctx context.Context, c *cli.Context, name string) (*session, error) {
	return dialID(ctx, c, name, c.Args().First())
}

// dialID is dialVerb for the conversation id, wherever the verb reads it.
func dialID(ctx context.Context, c *cli.Context, name, id string) (*session, error) {
	if !conversations.ValidID(id) {
		return nil, notAnID(id)
	}
	path, err := conversationSocket(ctx, id, c.String("socket"))
	if err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	cl, err := client.Dial(dctx, path, client.Options{Name: "mosaicctl " + name})
	if err != nil {
		return nil, dialError(ctx, id, "connect to conversation "+id, err, connectTimeout)
	}
	s := &session{id: id, c: cl, out: os.Stdout}
	var echo io.Writer
	if c.Bool("json") {
		echo, s.out = os.Stdout, io.Discard
	}
	s.tape = record(cl, echo)
	return s, nil
}

// startVerb checks that the one argument is there, connects and makes
// sure the binding is known: the start of interrupt, stop and recover.
func startVerb(ctx context.Context, c *cli.Context, name string) (*session, error) {
	if _, err := idArg(c); err != nil {
		return nil, err
	}
	s, err := dialVerb(ctx, c, name)
	if err != nil {
		return nil, err
	}
	if err := s.bind(ctx); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// got counts a reply the controller sent for a command method's call:
// its result or its refusal (an outcome error or an unsent command has
// none). It returns err unchanged.
func (s *session) got(err error) error {
	var r *protocol.Refusal
	if err == nil || errors.As(err, &r) {
		s.replies++
	}
	return err
}

// note writes one line to the session's notes (standard error).
func (s *session) note(format string, a ...any) {
	w := s.notes
	if w == nil {
		w = os.Stderr
	}
	fmt.Fprintf(w, format+"\n", a...)
}

// close waits until the tape holds every reply the verb read (so --json
// printed it, with everything before it), then ends the connection. A
// disconnect never releases control: the binding says the controller is
// gone and the next client takes over.
func (s *session) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.tape.caughtUp(ctx, s.replies)
	s.c.Close()
}

// bind waits for the binding the controller sends right after the
// welcome. A history page that cannot be read does not stop a command
// once a binding is known (an older controller is observed instead).
func (s *session) bind(ctx context.Context) error {
	observed, err := awaitBinding(ctx, s.c)
	if observed {
		s.got(err)
	}
	if err != nil && s.c.State().Bound && protocol.CodeOf(err) != "" {
		return nil
	}
	return err
}

// bindingWait bounds the wait for the binding a controller sends after its
// welcome: one built before that sends none until asked. A controller
// started by this very connect answers the hello first and sends the
// binding once its engine is up (docs/protocol.md §3), so the wait covers
// a start, as the dial's connectTimeout did when the welcome waited for it.
const bindingWait = 30 * time.Second

// awaitBinding waits until c has read a binding; after bindingWait it asks
// with an observe, and says so (observed) so the reply can be counted.
func awaitBinding(ctx context.Context, c *client.Client) (observed bool, err error) {
	wctx, cancel := context.WithTimeout(ctx, bindingWait)
	defer cancel()
	_, err = c.WaitBound(wctx)
	if err == nil || ctx.Err() != nil || c.Err() != nil {
		return false, err
	}
	octx, ocancel := context.WithTimeout(ctx, connectTimeout)
	defer ocancel()
	_, err = c.Observe(octx)
	return true, err
}

// take acquires control when --take asks for it. recovery allows the
// recovery path: when a takeover refuses fenced (admission closed by a
// stop or an uncertain binding), acquire recovery control, with consent.
func (s *session) take(ctx context.Context, c *cli.Context, recovery bool, consent consent) error {
	if !c.Bool("take") {
		return nil
	}
	_, err := s.c.Takeover(ctx)
	if s.got(err) == nil || protocol.CodeOf(err) != protocol.CodeFenced {
		return err
	}
	if !recovery {
		return fencedFix(err, s.id, s.c.State().Binding)
	}
	_, err = s.confirmed(ctx, protocol.CmdAcquireRecoveryControl, consent, func(id string) error {
		_, err := s.c.AcquireRecoveryControl(ctx, id)
		return err
	})
	return err
}

// confirmed confirms op (confirm) and passes the confirmation to use. A
// confirmation is bound to the stop context, and a controller runs stops
// by itself (a restarted one stops an orphan's remains): one that begins
// or ends between the confirmation and its use makes use refused (the
// stop context changed). It then says so and confirms once more, shown
// again and bound to the state as it now is; a second change is the
// verb's answer. used says whether err is use's (else the confirmation
// itself failed).
func (s *session) confirmed(ctx context.Context, op string, how consent, use func(id string) error) (used bool, err error) {
	for try := 0; ; try++ {
		cf, err := s.confirm(ctx, op, how)
		if err != nil {
			return false, err
		}
		err = use(cf.ID)
		if s.got(err) == nil || try > 0 || protocol.CodeOf(err) != protocol.CodeConfirmation {
			return true, err
		}
		fmt.Fprintf(s.out, "the controller refused the confirmation (%s); confirming once more:\n", terminal.SanitizeLine(err.Error()))
	}
}

// consent says how a confirmation is answered: yes (--yes, or the verb is
// itself the consent), or ask on a terminal.
type consent struct {
	yes bool
	// why names the consent in the output: "--yes", "recover".
	why string
}

// confirm issues a confirmation for op, shows its intent and answers it:
// confirm with consent, decline (and refuse) without. Without --yes and
// without a terminal to ask on it refuses confirmation-required, after
// saying what would have been done.
func (s *session) confirm(ctx context.Context, op string, how consent) (*protocol.Confirmation, error) {
	cf, err := s.c.IssueConfirmation(ctx, op)
	if s.got(err) != nil {
		return nil, err
	}
	ok, err := s.ask(cf, how)
	if err != nil || !ok {
		// A declined confirmation can never be used; answering is tidiness.
		_, derr := s.c.AnswerConfirmation(ctx, cf.ID, client.AnswerDecline)
		s.got(derr)
		if err == nil {
			err = protocol.Refuse(protocol.CodeDeclined, "%s declined; nothing was done", op)
		}
		return nil, err
	}
	answered, err := s.c.AnswerConfirmation(ctx, cf.ID, client.AnswerConfirm)
	if s.got(err) != nil {
		return nil, err
	}
	if answered.State != protocol.ConfirmationAnswered {
		return nil, fmt.Errorf("confirmation %s for %s is %s, not answered", cf.ID, op, answered.State)
	}
	return cf, nil
}

// ask gets consent for cf: given, or y on the terminal on stdin.
func (s *session) ask(cf *protocol.Confirmation, how consent) (bool, error) {
	plan := s.plan(cf)
	if how.yes {
		fmt.Fprintf(s.out, "%s, confirmed by %s:\n%s", cf.Operation, how.why, plan)
		return true, nil
	}
	if !term.IsTerminal(int(os.Stdin.Fd())) {
		return false, protocol.Refuse(protocol.CodeConfirmationRequired,
			"%s needs consent: pass --yes, or run on a terminal to answer y/N; it would %s",
			cf.Operation, strings.TrimPrefix(cf.Intent, cf.Operation+" "))
	}
	fmt.Fprintf(os.Stderr, "%s will:\n%sConfirm %s? [y/N] ", cf.Operation, plan, cf.Operation)
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil && line == "" {
		return false, nil // end of input: no consent
	}
	a := strings.ToLower(strings.TrimSpace(line))
	return a == "y" || a == "yes", nil
}

// plan is what a person confirms: the binding the confirmation is bound to
// and the server's intent, exactly, made inert for a terminal.
func (s *session) plan(cf *protocol.Confirmation) string {
	st := s.c.State()
	var b strings.Builder
	fmt.Fprintf(&b, "  conversation %s, execution %s, generation %d\n", s.id, orDash(cf.Execution), cf.Generation)
	if bd := st.Binding; bd != nil && bd.Scope != "" {
		fmt.Fprintf(&b, "  engine %s in %s (cohort %s), state %s, engine %s\n",
			orDash(bd.Engine), bd.Scope, orDash(bd.Cohort), bd.State, orDash(bd.EngineState))
	}
	fmt.Fprintf(&b, "  %s\n", terminal.SanitizeLine(cf.Intent))
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
