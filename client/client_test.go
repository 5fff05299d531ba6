package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/protocol"
)

// wait bounds every blocking step of a test; it is a hang guard, never an
// assertion about timing.
const wait = 10 * time.Second

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	t.Cleanup(cancel)
	return ctx
}

func dial(t *testing.T, f *fakeServer, opts Options) *Client {
	t.Helper()
	c, err := Dial(testContext(t), f.path, opts)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// observed dials and observes, so commands have a generation to name.
func observed(t *testing.T, f *fakeServer) *Client {
	t.Helper()
	c := dial(t, f, Options{Name: "test"})
	if _, err := c.Observe(testContext(t)); err != nil {
		t.Fatalf("observe: %v", err)
	}
	return c
}

// next reads Updates until a record of kind arrives and returns it.
func next(t *testing.T, c *Client, kind string) Update {
	t.Helper()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case u, ok := <-c.Updates():
			if !ok {
				t.Fatalf("updates closed waiting for %s: %v", kind, c.Err())
			}
			if u.Record == kind {
				return u
			}
		case <-timer.C:
			t.Fatalf("no %s record", kind)
		}
	}
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	var r *protocol.Refusal
	if !errors.As(err, &r) {
		t.Fatalf("got %v, want a *protocol.Refusal %s", err, code)
	}
	if r.Code != code {
		t.Fatalf("refusal %q (%s), want %q", r.Code, r.Message, code)
	}
}

func TestDial(t *testing.T) {
	t.Run("welcome", func(t *testing.T) {
		f := newFake(t, nil)
		c := dial(t, f, Options{Name: "test"})
		s := c.State()
		if s.Conversation != "c-test" || s.Connection == "" || s.Mode != ModeObserver || s.Bound {
			t.Fatalf("state after welcome: %+v", s)
		}
		if w := c.Welcome(); w.Server != "fake/1" || w.Protocol != 1 {
			t.Fatalf("welcome: %+v", w)
		}
	})
	t.Run("refused hello is a typed refusal", func(t *testing.T) {
		f := newFake(t, func(f *fakeServer) { f.refuseHello = protocol.CodePeerUID })
		_, err := Dial(testContext(t), f.path, Options{})
		wantCode(t, err, protocol.CodePeerUID)
	})
	t.Run("no socket", func(t *testing.T) {
		_, err := Dial(testContext(t), t.TempDir()+"/none.sock", Options{})
		if err == nil {
			t.Fatal("dial of a missing socket succeeded")
		}
	})
}

func TestObserveNeedsNothingElse(t *testing.T) {
	f := newFake(t, nil)
	c := dial(t, f, Options{})
	if _, err := c.Takeover(testContext(t)); !errors.Is(err, ErrNotBound) {
		t.Fatalf("takeover before any binding: %v, want ErrNotBound", err)
	}
	obs, err := c.Observe(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	if obs.Seam.Execution != "x-1" || string(obs.History) != `{"entries":[]}` {
		t.Fatalf("observed: %+v", obs)
	}
	s := c.State()
	if !s.Bound || s.Generation != 1 || s.Execution != "x-1" || s.Mode != ModeObserver {
		t.Fatalf("state after observe: %+v", s)
	}
	u := next(t, c, protocol.RecordObserved)
	if !u.Reply || u.FromSeq != nil || u.Observed.Request != obs.Request {
		t.Fatalf("observed on Updates: %+v", u)
	}
}

func TestCorrelation(t *testing.T) {
	t.Run("a held reply does not answer a later request", func(t *testing.T) {
		release := make(chan struct{})
		f := newFake(t, func(f *fakeServer) {
			f.gate = func(cmd protocol.Command) <-chan struct{} {
				if cmd.Request == "held" {
					return release
				}
				return nil
			}
		})
		c := observed(t, f)
		ctx := testContext(t)
		type out struct {
			r   *Reply
			err error
		}
		held := make(chan out, 1)
		go func() {
			r, err := c.Do(ctx, protocol.Command{Type: protocol.CmdObserve, Request: "held"})
			held <- out{r, err}
		}()
		ctl, err := c.Takeover(ctx) // answered while "held" waits
		if err != nil {
			t.Fatal(err)
		}
		if ctl.Mode != ModeController || ctl.Generation != 2 {
			t.Fatalf("control: %+v", ctl)
		}
		close(release)
		o := <-held
		if o.err != nil || o.r.Observed == nil || o.r.Observed.Request != "held" {
			t.Fatalf("held observe: %+v, %v", o.r, o.err)
		}
	})
	t.Run("concurrent requests each get their own reply", func(t *testing.T) {
		const n = 8
		var mu sync.Mutex
		gates := map[string]chan struct{}{}
		f := newFake(t, func(f *fakeServer) {
			f.gate = func(cmd protocol.Command) <-chan struct{} {
				if cmd.Type != protocol.CmdIssueConfirmation {
					return nil
				}
				mu.Lock()
				defer mu.Unlock()
				ch := make(chan struct{})
				gates[cmd.Request] = ch
				if len(gates) == n { // all in: answer them in reverse
					for i := n - 1; i >= 0; i-- {
						close(gates[fmt.Sprintf("q-%d", i)])
					}
				}
				return ch
			}
		})
		c := observed(t, f)
		ctx := testContext(t)
		if _, err := c.Takeover(ctx); err != nil {
			t.Fatal(err)
		}
		gen := c.State().Generation
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id := fmt.Sprintf("q-%d", i)
				r, err := c.Do(ctx, protocol.Command{Type: protocol.CmdIssueConfirmation, Request: id,
					Operation: protocol.CmdForceStop, Generation: &gen})
				switch {
				case err != nil:
					errs <- err
				case r.Confirmation == nil || r.Confirmation.Request != id:
					errs <- fmt.Errorf("request %s got %+v", id, r)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}

func TestBroadcast(t *testing.T) {
	f := newFake(t, nil)
	a, b := observed(t, f), observed(t, f)
	ctx := testContext(t)
	if _, err := a.Takeover(ctx); err != nil {
		t.Fatal(err)
	}
	if s := a.State(); s.Mode != ModeController || s.Generation != 2 {
		t.Fatalf("a after takeover: %+v", s)
	}
	u := next(t, b, protocol.RecordControl)
	if u.Reply || u.Control.Mode != ModeObserver || u.Control.Controller != a.State().Connection {
		t.Fatalf("b's control broadcast: %+v", u.Control)
	}
	next(t, b, protocol.RecordBinding)
	if s := b.State(); s.Mode != ModeObserver || s.Generation != 2 || s.Controller != a.State().Connection {
		t.Fatalf("b after a's takeover: %+v", s)
	}

	// b names the generation it learnt from the broadcast and wins (H1).
	if _, err := b.Takeover(ctx); err != nil {
		t.Fatal(err)
	}
	u = next(t, a, protocol.RecordControl)
	for u.Reply { // a's own takeover reply is on Updates too
		u = next(t, a, protocol.RecordControl)
	}
	if u.Control.Revoked != a.State().Connection || u.Control.Mode != ModeObserver {
		t.Fatalf("a's revocation: %+v", u.Control)
	}
	if s := a.State(); s.Mode != ModeObserver || s.Generation != 3 {
		t.Fatalf("a after revocation: %+v", s)
	}
	// a's view was current, but it lost control.
	_, err := a.Prompt(ctx, "hello")
	wantCode(t, err, "revoked")
}

func TestRefusals(t *testing.T) {
	tests := []struct {
		name string
		take bool
		busy bool
		run  func(context.Context, *Client) error
		code string
	}{
		{"prompt as observer", false, false, func(ctx context.Context, c *Client) error {
			_, err := c.Prompt(ctx, "hi")
			return err
		}, "not-controller"},
		{"self-takeover", true, false, func(ctx context.Context, c *Client) error {
			_, err := c.Takeover(ctx)
			return err
		}, "already-controller"},
		{"slash text", true, false, func(ctx context.Context, c *Client) error {
			_, err := c.Prompt(ctx, "  /compact")
			return err
		}, "text-policy"},
		{"empty draft", true, false, func(ctx context.Context, c *Client) error {
			_, err := c.Prompt(ctx, "")
			return err
		}, "draft"},
		{"busy", true, true, func(ctx context.Context, c *Client) error {
			_, err := c.Prompt(ctx, "hi")
			return err
		}, "busy"},
		{"interrupt with nothing running", true, false, func(ctx context.Context, c *Client) error {
			_, err := c.Interrupt(ctx)
			return err
		}, "no-turn"},
		{"recover without a stop", true, false, func(ctx context.Context, c *Client) error {
			_, err := c.Recover(ctx, "")
			return err
		}, "stop-proof"},
		{"launch of an unknown eligibility", true, false, func(ctx context.Context, c *Client) error {
			_, err := c.Launch(ctx, "el-nope")
			return err
		}, "eligibility"},
		{"approval", true, false, func(ctx context.Context, c *Client) error {
			_, err := c.Do(ctx, protocol.Command{Type: protocol.CmdApproval, Decision: "allow"})
			return err
		}, "unsupported-capability"},
		{"force stop with a foreign confirmation", true, false, func(ctx context.Context, c *Client) error {
			_, err := c.ForceStop(ctx, "cf-nope")
			return err
		}, "confirmation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, nil)
			c := observed(t, f)
			ctx := testContext(t)
			if tt.take {
				if _, err := c.Takeover(ctx); err != nil {
					t.Fatal(err)
				}
			}
			f.setBusy(tt.busy)
			err := tt.run(ctx, c)
			wantCode(t, err, tt.code)
			if got := protocol.CodeOf(err); got != tt.code {
				t.Fatalf("CodeOf: %q", got)
			}
			u := next(t, c, protocol.RecordRefusal) // refusals are on Updates too
			if !u.Reply || u.Refusal.Code != tt.code {
				t.Fatalf("refusal on Updates: %+v", u.Refusal)
			}
		})
	}
}

func TestStops(t *testing.T) {
	f := newFake(t, nil)
	c := observed(t, f)
	ctx := testContext(t)
	if _, err := c.Takeover(ctx); err != nil {
		t.Fatal(err)
	}
	if r, err := c.Prompt(ctx, "hello"); err != nil || r.State != protocol.ReceiptAcknowledged {
		t.Fatalf("prompt: %+v, %v", r, err)
	}

	r, err := c.Interrupt(ctx)
	if err != nil || r.State != protocol.ReceiptReconciled || r.Stop == "" {
		t.Fatalf("interrupt: %+v, %v", r, err)
	}
	var states []string
	for len(states) < 3 {
		u := next(t, c, protocol.RecordStop)
		if u.Stop.ID == r.Stop {
			states = append(states, u.Stop.State)
		}
	}
	if fmt.Sprint(states) != "[fenced cancelling reconciled]" {
		t.Fatalf("interrupt transitions: %v", states)
	}

	issued, err := c.IssueConfirmation(ctx, protocol.CmdForceStop)
	if err != nil || issued.Intent == "" || issued.State != "issued" {
		t.Fatalf("issue: %+v, %v", issued, err)
	}
	if _, err := c.AnswerConfirmation(ctx, issued.ID, AnswerConfirm); err != nil {
		t.Fatal(err)
	}
	r, err = c.ForceStop(ctx, issued.ID)
	if err != nil || r.State != protocol.ReceiptStopped {
		t.Fatalf("force stop: %+v, %v", r, err)
	}
	for {
		u := next(t, c, protocol.RecordStop)
		if u.Stop.ID == r.Stop && u.Stop.State == "stopped" {
			if u.Stop.ProofDigest == "" || len(u.Stop.Proof) == 0 {
				t.Fatalf("stopped without proof: %+v", u.Stop)
			}
			break
		}
	}
	// The confirmation was single-use.
	_, err = c.ForceStop(ctx, issued.ID)
	wantCode(t, err, "confirmation")

	el, err := c.Recover(ctx, "")
	if err != nil || el.Stop != r.Stop {
		t.Fatalf("recover: %+v, %v", el, err)
	}
	before := c.State()
	lr, err := c.Launch(ctx, el.ID)
	if err != nil || lr.State != protocol.ReceiptLaunched {
		t.Fatalf("launch: %+v, %v", lr, err)
	}
	after := c.State()
	if after.Execution == before.Execution || after.Generation != before.Generation+1 {
		t.Fatalf("binding after launch: %+v (before %+v)", after, before)
	}
	if _, err := c.Launch(ctx, el.ID); err == nil {
		t.Fatal("an eligibility launched twice")
	}
}

func TestRecoveryControl(t *testing.T) {
	f := newFake(t, nil)
	a, b := observed(t, f), observed(t, f)
	ctx := testContext(t)
	if _, err := a.Takeover(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ForceStop(ctx, ""); err != nil {
		t.Fatal(err)
	}
	next(t, b, protocol.RecordBinding)
	for b.State().Binding.State != protocol.BindingStopped {
		next(t, b, protocol.RecordBinding)
	}
	_, err := b.Takeover(ctx)
	wantCode(t, err, "fenced")
	ctl, err := b.AcquireRecoveryControl(ctx, "")
	if err != nil || ctl.Mode != ModeController {
		t.Fatalf("acquire-recovery-control: %+v, %v", ctl, err)
	}
}

func TestRetry(t *testing.T) {
	f := newFake(t, func(f *fakeServer) {
		dropped := false
		f.drop = func(cmd protocol.Command) bool {
			if cmd.Type == protocol.CmdPrompt && !dropped {
				dropped = true
				return true
			}
			return false
		}
	})
	c := observed(t, f)
	ctx := testContext(t)
	if _, err := c.Takeover(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := c.Prompt(ctx, "hello")
	var lost *OutcomeError
	if !errors.As(err, &lost) {
		t.Fatalf("prompt on a broken connection: %v, want an *OutcomeError", err)
	}
	if lost.Command.Text != "hello" || lost.Command.Request == "" || !errors.Is(err, ErrClosed) {
		t.Fatalf("outcome error: %+v", lost)
	}
	<-c.Done()

	d, err := c.Reconnect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	r1, err := d.Resend(ctx, lost.Command)
	if err != nil || r1.Receipt == nil || r1.Receipt.Request != lost.Command.Request {
		t.Fatalf("resend: %+v, %v", r1, err)
	}
	r2, err := d.Resend(ctx, lost.Command)
	if err != nil || r2.Receipt.ID != r1.Receipt.ID {
		t.Fatalf("second resend: %+v, %v", r2, err)
	}
	if n := f.count(protocol.CmdPrompt); n != 1 {
		t.Fatalf("prompt dispatched %d times, want once", n)
	}

	other := lost.Command
	other.Text = "something else"
	_, err = d.Resend(ctx, other)
	wantCode(t, err, "conflicting-request")

	unknown := lost.Command
	unknown.Request = "r-never-sent"
	_, err = d.Resend(ctx, unknown)
	wantCode(t, err, "receipt-unknown")
}

func TestResendTakeoverOnNewConnection(t *testing.T) {
	f := newFake(t, func(f *fakeServer) {
		f.drop = func(cmd protocol.Command) bool { return cmd.Type == protocol.CmdTakeover && !cmd.Retry }
	})
	c := observed(t, f)
	ctx := testContext(t)
	_, err := c.Takeover(ctx)
	var lost *OutcomeError
	if !errors.As(err, &lost) {
		t.Fatalf("takeover on a broken connection: %v", err)
	}
	old := c.State().Connection
	d, err := c.Reconnect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if _, err := d.Observe(ctx); err != nil {
		t.Fatal(err)
	}
	before := d.State()
	r, err := d.Resend(ctx, lost.Command)
	if err != nil || r.Control == nil || r.Control.Controller != old {
		t.Fatalf("resent takeover: %+v, %v", r, err)
	}
	// The stored control record is history: it made the old connection
	// controller, not this one, and it changes nothing here.
	if after := d.State(); after.Mode != ModeObserver || after.Generation != before.Generation {
		t.Fatalf("state after the resend: %+v (before %+v)", after, before)
	}
	u := next(t, d, protocol.RecordControl)
	if !u.Reply || !u.Retry {
		t.Fatalf("the resent reply on Updates: %+v", u)
	}
}

func TestReconnectIsObserver(t *testing.T) {
	f := newFake(t, nil)
	c := observed(t, f)
	ctx := testContext(t)
	if _, err := c.Takeover(ctx); err != nil {
		t.Fatal(err)
	}
	old := c.State().Connection
	d, err := c.Reconnect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	for range c.Updates() { // Close closes it without delivering the rest
	}
	if !errors.Is(c.Err(), ErrClosed) {
		t.Fatalf("old client's Err: %v", c.Err())
	}
	if s := d.State(); s.Mode != ModeObserver || s.Connection == old {
		t.Fatalf("after reconnect: %+v", s)
	}
	if _, err := d.Observe(ctx); err != nil {
		t.Fatal(err)
	}
	// Disconnect never releases control: the old connection still holds it.
	if s := d.State(); s.Mode != ModeObserver || s.Controller != old {
		t.Fatalf("after reconnect and observe: %+v", s)
	}
	_, err = d.Prompt(ctx, "hi")
	wantCode(t, err, "not-controller")
}

// heldGate returns a gate that holds the request with id "held" until
// release closes, and a channel that says when the server got it.
func heldGate(release <-chan struct{}) (func(protocol.Command) <-chan struct{}, <-chan struct{}) {
	arrived := make(chan struct{}, 1)
	return func(cmd protocol.Command) <-chan struct{} {
		if cmd.Request != "held" {
			return nil
		}
		arrived <- struct{}{}
		return release
	}, arrived
}

func waitFor(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(wait):
		t.Fatal("the server never got the request")
	}
}

func TestCloseFailsWaiting(t *testing.T) {
	release := make(chan struct{})
	defer close(release) // before the fake's cleanup waits for the held reply
	gate, arrived := heldGate(release)
	f := newFake(t, func(f *fakeServer) { f.gate = gate })
	c := observed(t, f)
	errc := make(chan error, 1)
	go func() {
		_, err := c.Do(testContext(t), protocol.Command{Type: protocol.CmdObserve, Request: "held"})
		errc <- err
	}()
	waitFor(t, arrived)
	// A second request with the same id is refused locally while one waits.
	if _, err := c.Do(testContext(t), protocol.Command{Type: protocol.CmdObserve, Request: "held"}); err == nil {
		t.Fatal("a duplicate request id was sent")
	}
	c.Close()
	var lost *OutcomeError
	if err := <-errc; !errors.As(err, &lost) || !errors.Is(err, ErrClosed) {
		t.Fatalf("waiting request after Close: %v", err)
	}
	if _, err := c.Observe(testContext(t)); !errors.Is(err, ErrClosed) {
		t.Fatalf("request after Close: %v", err)
	}
}

func TestContextEndsWait(t *testing.T) {
	release := make(chan struct{})
	gate, arrived := heldGate(release)
	f := newFake(t, func(f *fakeServer) { f.gate = gate })
	c := observed(t, f)
	ctx, cancel := context.WithCancel(testContext(t))
	errc := make(chan error, 1)
	go func() {
		_, err := c.Do(ctx, protocol.Command{Type: protocol.CmdObserve, Request: "held", FromSeq: new(uint64)})
		errc <- err
	}()
	waitFor(t, arrived)
	cancel()
	var lost *OutcomeError
	if err := <-errc; !errors.As(err, &lost) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
	close(release)
	// The late reply is still recognised as this client's, with its fromSeq.
	u := next(t, c, protocol.RecordObserved)
	for u.Observed.Request != "held" {
		u = next(t, c, protocol.RecordObserved)
	}
	if !u.Reply || u.FromSeq == nil || *u.FromSeq != 0 {
		t.Fatalf("late observed: %+v", u)
	}
}
