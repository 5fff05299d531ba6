package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/mosaic-agents/mosaic/client"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/terminal"
)

// frameDelay coalesces redraws: a burst of events (a streamed answer) is
// drawn once per delay instead of once per event.
const frameDelay = 15 * time.Millisecond

// attacher is the screen loop. Everything it holds is read and written
// on the loop goroutine only; requests run on their own goroutines and
// hand their outcome back as a function on results.
type attacher struct {
	ctx  context.Context
	tty  *attachTTY
	conv string

	c         *client.Client
	connected bool
	lt        *client.Transcript
	follow    terminal.Follow
	// stale is set when lt may have changed since the last frame took its
	// snapshot (a keystroke alone does not copy the transcript).
	stale   bool
	seam    protocol.Seam
	lastSeq uint64
	// older is the history read back above lt's page; cursor reads the
	// page before it ("" at the beginning). chain counts the cursor
	// chains: a fresh page starts a new one, and a page read on an older
	// chain is dropped.
	older  terminal.Older
	cursor string
	chain  int

	scr     terminal.Screen
	parser  terminal.Parser
	escWait time.Duration
	// pending is the confirmation the open dialog answers, and the
	// connection it was issued to (it is bound to that connection).
	pending   *protocol.Confirmation
	pendingOn *client.Client

	results chan func()
	// endShown is the engine end last shown as a notice, so a binding
	// rebroadcast for another reason does not show it again.
	endShown protocol.EngineEnd
	quit     bool
	// prompts counts prompts in flight: when the connection ends their
	// lost outcomes are the notice, not the disconnect.
	prompts int
	// approvals are the open native decisions (attach_approval.go).
	approvals approvalsOf
}

func newAttacher(ctx context.Context, tty *attachTTY, c *client.Client, conv string, escWait time.Duration) *attacher {
	a := &attacher{ctx: ctx, tty: tty, conv: conv, escWait: escWait, results: make(chan func(), 16)}
	a.use(c)
	return a
}

// use makes c the connection: a fresh library transcript, and a fresh
// observe whose reply arrives on c's updates like everything else.
func (a *attacher) use(c *client.Client) {
	a.c, a.connected, a.lt, a.follow, a.stale = c, true, client.NewTranscript(), terminal.Follow{}, true
	a.seam, a.lastSeq = protocol.Seam{}, 0
	a.newChain("")
	a.async(func(ctx context.Context) func() {
		if _, err := c.Observe(ctx); err != nil {
			return a.noticeOf("observe", err)
		}
		return nil
	})
}

// async runs f on its own goroutine and the function it returns (if any)
// on the loop goroutine.
func (a *attacher) async(f func(ctx context.Context) func()) {
	go func() {
		defer a.tty.guard()
		if done := f(a.ctx); done != nil {
			select {
			case a.results <- done:
			case <-a.ctx.Done():
			}
		}
	}()
}

// readInput copies the terminal's bytes to a channel, one read per chunk:
// the parser sees the reads as they came, split escape sequences included.
func (a *attacher) readInput(in *os.File) <-chan []byte {
	ch := make(chan []byte)
	go func() {
		defer a.tty.guard()
		defer close(ch)
		buf := make([]byte, 4096)
		for {
			n, err := in.Read(buf)
			if n > 0 {
				select {
				case ch <- append([]byte(nil), buf[:n]...):
				case <-a.ctx.Done():
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	return ch
}

func (a *attacher) run(sigs, winch <-chan os.Signal) error {
	input := a.readInput(a.tty.in)
	esc := time.NewTimer(time.Hour)
	esc.Stop()
	var escC <-chan time.Time
	frame := time.NewTimer(0)
	frameC := frame.C
	for !a.quit {
		var updates <-chan client.Update
		if a.connected {
			updates = a.c.Updates()
		}
		select {
		case <-a.ctx.Done():
			return nil
		case <-sigs:
			return nil
		case b, ok := <-input:
			if !ok {
				return nil // the terminal closed
			}
			a.keys(a.parser.Feed(b))
			escC = nil
			if a.parser.Pending() {
				esc.Reset(a.escWait)
				escC = esc.C
			}
		case <-escC:
			escC = nil
			a.keys(a.parser.Flush())
		case u, ok := <-updates:
			if !ok {
				a.disconnected()
			} else {
				a.update(u)
			}
		case f := <-a.results:
			f()
		case <-winch:
		case <-frameC:
			frameC = nil
			a.draw()
			continue
		}
		if frameC == nil {
			frame.Reset(frameDelay)
			frameC = frame.C
		}
	}
	return nil
}

// keys applies parsed keys in order.
func (a *attacher) keys(ks []terminal.Key) {
	for _, k := range ks {
		act, text := a.scr.Handle(k)
		a.act(act, text)
		if a.quit {
			return
		}
	}
}

// update folds one server record into the library transcript, asks for
// the observe it needs, and turns broadcasts into notices.
func (a *attacher) update(u client.Update) {
	c := a.c
	a.stale = true
	if w := a.lt.Update(u); w.Observe {
		a.async(func(ctx context.Context) func() {
			if _, err := c.Reobserve(ctx, w); err != nil {
				return a.noticeOf("re-read", err)
			}
			return nil
		})
	}
	switch {
	case u.Observed != nil:
		a.seam, a.lastSeq = u.Observed.Seam, u.Observed.Seam.ReplayUntil
		// A page the transcript took starts a new cursor chain; a resume
		// that kept the old page leaves the chain (its cursor was
		// replaced: the next read back is refused and re-reads).
		if bytes.Equal(a.lt.Snapshot().History, u.Observed.History) {
			a.newChain(u.Observed.Cursor)
		}
		a.approvals.reset(u.Observed.Approvals)
	case u.Approval != nil:
		if n := a.approvals.put(*u.Approval); n != "" {
			a.scr.SetNotice(n)
		}
	case u.Event != nil && u.Event.Execution == a.seam.Execution:
		a.lastSeq = max(a.lastSeq, u.Event.Last())
	case u.Stop != nil:
		s := u.Stop
		n := fmt.Sprintf("%s %s of execution %s: %s", s.Kind, s.ID, s.Execution, s.State)
		if s.Reason != "" {
			n += " (" + s.Reason + ")"
		}
		a.scr.SetNotice(n)
	case u.Notice != nil:
		a.scr.SetNotice(terminal.NoticeLine(u.Notice))
	case u.Refusal != nil && !u.Reply:
		a.scr.SetNotice("refused: " + u.Refusal.Code + ": " + u.Refusal.Message)
	case u.Binding != nil && u.Binding.EngineEnd != nil:
		if e := u.Binding.EngineEnd; e.Execution != a.endShown.Execution || e.Status != a.endShown.Status || e.Preflight != a.endShown.Preflight {
			a.endShown = *e
			a.scr.SetNotice(engineEndLine(e))
		}
	}
	a.syncControl()
	a.syncApproval()
}

// syncControl shows who controls the conversation; a change clears the
// composer (S4).
func (a *attacher) syncControl() {
	st := a.c.State()
	if !st.Bound {
		return
	}
	a.scr.SetControl(terminal.Control{Controller: st.Controller, Generation: uint64(st.Generation)},
		a.connected && st.Mode == client.ModeController)
}

// disconnected: the connection ended. Nothing is retried: a prompt in
// flight settles as outcome unknown, and Ctrl-O reconnects as an observer.
func (a *attacher) disconnected() {
	a.connected = false
	a.scr.Status.Controller = false
	if a.pending != nil {
		a.pending, a.pendingOn = nil, nil
		a.scr.CloseDialog()
	}
	if a.prompts > 0 || a.scr.Notice() == terminal.OutcomeUnknown {
		return // a lost outcome is the notice, whichever arrived first
	}
	why := "the connection ended"
	if err := a.c.Err(); err != nil {
		why = err.Error()
	}
	a.scr.SetNotice("disconnected: " + why)
}

// draw renders the screen and writes it in one write: each row addressed
// and cleared, the status row in reverse video, the cursor at the end of
// the composer.
func (a *attacher) draw() {
	a.status()
	a.chips()
	// A re-read (use) starts an empty transcript: keep the lines on screen
	// until its page arrives, or the empty one would "fit" and the
	// viewport would jump to the end.
	if a.stale {
		if v := a.lt.Snapshot(); v.History != nil || a.scr.Transcript == nil {
			a.scr.Transcript, a.stale = a.follow.Update(a.older, v), false
			if v.History != nil && a.scr.Notice() == rereadNotice {
				a.scr.SetNotice(rereadDone)
			}
		}
	}
	w, h := a.tty.size()
	f := a.scr.Render(w, h)
	var b strings.Builder
	b.WriteString("\x1b[?25l")
	for i, l := range f.Lines {
		fmt.Fprintf(&b, "\x1b[%d;1H\x1b[2K", i+1)
		if i == f.StatusRow {
			b.WriteString("\x1b[7m" + l + strings.Repeat(" ", max(w-terminal.Width(l), 0)) + "\x1b[0m")
			continue
		}
		b.WriteString(l)
	}
	fmt.Fprintf(&b, "\x1b[%d;%dH\x1b[?25h", f.CursorRow+1, f.CursorCol+1)
	a.tty.out.WriteString(b.String())
}

// status fills the status line from the connection's state.
func (a *attacher) status() {
	st := a.c.State()
	s := &a.scr.Status
	s.Conversation = a.conv
	s.Generation = uint64(max(st.Generation, 0))
	s.Engine, s.Binding, s.Replay = "", "", ""
	if b := st.Binding; b != nil {
		s.Engine = b.EngineState
		s.Binding = b.State
		if b.Admission == protocol.AdmissionClosed {
			s.Binding += " (admission closed"
			if b.AdmissionReason != "" {
				s.Binding += ": " + b.AdmissionReason
			}
			s.Binding += ")"
		}
		if b.Unconfined != "" {
			s.Binding += " UNCONFINED"
		}
	}
	if !a.connected {
		s.Binding = "disconnected (Ctrl-O reconnects)"
	}
	// The window as the last observe advertised it; its upper end follows
	// the events since (the controller does not say when the ring drops
	// its oldest).
	if until := max(a.seam.ReplayUntil, a.lastSeq); a.seam.Replay == "available" && until > 0 {
		s.Replay = fmt.Sprintf("seq %d-%d", max(a.seam.ReplayFrom, 1), until)
	} else if a.seam.Replay == "available" {
		s.Replay = "empty"
	}
}
