package claude

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/mosaic-agents/mosaic/engine"
	hclaude "github.com/mosaic-agents/mosaic/history/claude"
	"github.com/mosaic-agents/mosaic/protocol"
)

// Block is the protocol's content block.
type Block = protocol.Block

// Conn speaks Claude Code's stream-json protocol over the CLI's stdin and
// stdout: it correlates control responses by request id, maps frames onto
// protocol events in wire order, tracks turns and the one dispatch slot,
// and holds the native permission decisions. It implements
// engine.Driver.
type Conn struct {
	opts    engine.Options
	session string
	in      *engine.Stdin
	mu      sync.Mutex
	ids     uint64
	wait    map[string]chan *frame
	tr      *tracker
	mp      *mapper
	dec     []*decision
	dseq    uint64 // decisions kept so far: the suffix of their ids
	// answered holds the request ids answered (decided or refused), so
	// none is answered twice, even once its decision is forgotten.
	answered *engine.Recent[struct{}]
	changed  chan struct{}
	sent     *engine.Recent[struct{}] // prompt uuids written, the latest maxAnnounced (SentPrompt)
	// announced is what the CLI announced under each uuid (announced.go);
	// announcing is poked (never blocking) each time it changes.
	announced  *engine.Recent[hclaude.Said]
	announcing chan struct{}
	// notified counts the task notifications announced, by what their
	// line says (announced.go).
	notified *engine.Recent[int]
	// Re-attach (Options.Resume): synced is closed once the reader
	// skipped to the first LF, skipped counts the bytes, and seed is the
	// id of Resync's initialize, whose answer sets the turn state in wire
	// order.
	synced  chan struct{}
	skipped int64
	seed    string
	// refusals are the error answers refuse queued for writeRefusals;
	// closing is closed by Close, which ends it.
	refusals  chan refusalAnswer
	closing   chan struct{}
	closeOnce sync.Once
	*engine.Output
}

var _ engine.Driver = (*Conn)(nil)

// New starts reading the CLI's stdout (r) and returns a Conn writing to
// its stdin (w). session is the session UUID the seal passed; a frame
// naming another session marks the binding uncertain.
func New(r io.Reader, w io.WriteCloser, session string, opts engine.Options) (*Conn, error) {
	if opts.Execution == "" {
		return nil, errors.New("claude: Options.Execution is required")
	}
	if opts.CommandTimeout <= 0 {
		opts.CommandTimeout = engine.DefaultCommandTimeout
	}
	if opts.AbortTimeout <= 0 {
		opts.AbortTimeout = engine.DefaultAbortTimeout
	}
	if opts.LineLimit == 0 {
		opts.LineLimit = engine.DefaultLineLimit
	}
	c := &Conn{
		opts: opts, session: session,
		wait:       make(map[string]chan *frame),
		tr:         newTracker(),
		mp:         newMapper(opts.Execution),
		changed:    make(chan struct{}),
		answered:   engine.NewRecent[struct{}](maxAnswered),
		sent:       engine.NewRecent[struct{}](maxAnnounced),
		announced:  engine.NewRecent[hclaude.Said](maxAnnounced),
		announcing: make(chan struct{}, 1),
		notified:   engine.NewRecent[int](maxAnnounced),
		synced:     make(chan struct{}),
		refusals:   make(chan refusalAnswer, maxRefusals),
		closing:    make(chan struct{}),
		Output:     engine.NewOutput(opts.SeqBase, opts.MaxQueued),
	}
	c.in = engine.NewStdin(w, opts.StdinTimeout, c.stdinBroken)
	c.mp.seq = opts.SeqBase
	lr := engine.NewLineReader(r, opts.MaxLine)
	lr.Reduce(opts.LineLimit)
	switch {
	case opts.Resume:
		lr.SkipPartial(c.skippedTo)
	default:
		close(c.synced)
	}
	go engine.ReadLines(lr, c.handle, c.lose, c.finish)
	go c.writeRefusals()
	return c, nil
}

// skippedTo records where the re-attached reader found its first line
// boundary (Options.Resume).
func (c *Conn) skippedTo(n int64) {
	c.mu.Lock()
	c.skipped = n
	c.mu.Unlock()
	close(c.synced)
}

// Close closes the CLI's stdin. The CLI finishes a running turn first and
// stays alive while a background task runs (DIGEST §9). It never waits
// for a write in progress: a CLI that stopped reading its stdin holds
// that write until its deadline, and closing the writer is what ends it
// at once (the controller's end of the stdin socket pair is
// non-blocking, so the poller wakes the blocked write with an error).
func (c *Conn) Close() error {
	c.closeOnce.Do(func() { close(c.closing) })
	if err := c.in.Close(); err != nil {
		return fmt.Errorf("close claude stdin: %w", err)
	}
	return nil
}

// StdinBroken returns the write that broke the CLI's stdin (timed out or
// cut short), nil while it is whole: nothing more is written to it.
func (c *Conn) StdinBroken() error { return c.in.Broken() }

// stdinBroken tells the controller, in wire order, that nothing more
// reaches the CLI: an unavailable event with reason stdin-broken.
func (c *Conn) stdinBroken(error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.push(c.mp.unavailable(protocol.ReasonStdinBroken, ""))
}

// Changed is closed (and replaced) whenever a decision is added or
// resolved: the controller re-reads Decisions.
func (c *Conn) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

func (c *Conn) lose(reason string, cause error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tr.markUncertain(reason + ": " + cause.Error())
	c.push(c.mp.unavailable(reason, ""))
}

func (c *Conn) handle(line []byte, clip *engine.Clip) {
	cut := clip != nil
	var f frame
	if err := json.Unmarshal(line, &f); err != nil || f.Type == "" {
		c.mu.Lock()
		c.tr.markUncertain("undecodable line")
		c.push(c.mp.unavailable(protocol.ReasonUndecodable, ""))
		c.mu.Unlock()
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if f.SessionID != "" && c.session != "" && f.SessionID != c.session {
		c.tr.markUncertain("frame of session " + label(f.SessionID))
	}
	switch f.Type {
	case "control_response":
		if f.Response != nil {
			f.Response.cut = cut
			if ch, ok := c.wait[f.Response.RequestID]; ok {
				delete(c.wait, f.Response.RequestID)
				if f.Response.RequestID == c.seed {
					c.applyInit(f.Response)
				}
				ch <- &f
				return
			}
		}
		c.push(c.mp.unavailable("uncorrelated-response", "control_response"))
		return
	case "control_request":
		c.controlRequest(&f, cut)
		return
	case "control_cancel_request":
		c.cancelDecision(f.RequestID)
		return
	}
	c.announce(&f, cut)
	c.tr.observe(&f)
	for _, e := range c.mp.mapFrame(&f, cut) {
		if e.Kind == protocol.EventRunSettled {
			// Counted before the event is queued: the controller's
			// queue dispatches only once its pump published as many
			// (Turn().Settles), so it can never see the event first.
			c.tr.settles++
		}
		c.push(e)
	}
	if f.Type == "result" {
		c.tr.settled(&f)
	}
}

// push queues an event; c.mu is held, so events keep wire order.
func (c *Conn) push(e protocol.Event) { c.Push(e) }

func (c *Conn) finish(err error) {
	// The cause is recorded before any waiting command wakes to read it.
	c.End(err)
	c.mu.Lock()
	engine.CloseWaiters(c.wait)
	c.tr.gone()
	c.mu.Unlock()
}

// send writes one frame as one JSONL record, whole or not at all once
// the stdin broke (engine.Stdin: its errors are refusals wrapping
// ErrStdinBroken).
func (c *Conn) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode claude frame: %w", err)
	}
	return c.in.Write(append(b, '\n'))
}

// control sends a control request and waits for its response.
func (c *Conn) control(ctx context.Context, request any, timeout time.Duration) (*controlResponse, error) {
	c.mu.Lock()
	select {
	case <-c.Done():
		c.mu.Unlock()
		return nil, engine.ErrClosed
	default:
	}
	id, ch := c.registerLocked()
	c.mu.Unlock()
	if err := c.send(map[string]any{"type": "control_request", "request_id": id, "request": request}); err != nil {
		c.forget(id)
		return nil, err
	}
	return c.await(ctx, id, ch, timeout)
}

// await waits for the answer to control request id.
func (c *Conn) await(ctx context.Context, id string, ch chan *frame, timeout time.Duration) (*controlResponse, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case f, ok := <-ch:
		if !ok {
			return nil, engine.ErrClosed
		}
		if f.Response.Subtype != "success" {
			return f.Response, &engine.NativeError{Command: "control_request", ID: id, Text: f.Response.Error}
		}
		return f.Response, nil
	case <-t.C:
		c.forget(id)
		return nil, fmt.Errorf("%w: control request %s", engine.ErrTimeout, id)
	case <-ctx.Done():
		c.forget(id)
		return nil, ctx.Err()
	}
}

// registerLocked takes the next control request id (with the re-attach
// prefix, so no answer meant for an earlier reader of the same pipe is
// taken for ours) and its waiter. Callers hold mu.
func (c *Conn) registerLocked() (string, chan *frame) {
	c.ids++
	id := fmt.Sprintf("%smosaic-%d", c.opts.IDPrefix, c.ids)
	ch := make(chan *frame, 1)
	c.wait[id] = ch
	return id, ch
}

func (c *Conn) forget(id string) {
	c.mu.Lock()
	delete(c.wait, id)
	c.mu.Unlock()
}

// Initialize sends the initialize control request and returns the
// permission requests the CLI still waits on, as it re-sends them
// (pending_permission_requests, DIGEST §3); they are (re)registered as
// decisions. Optional: the CLI runs prompts without it.
func (c *Conn) Initialize(ctx context.Context) ([]engine.NativeDecision, error) {
	r, err := c.control(ctx, map[string]any{"subtype": "initialize", "hooks": nil}, c.opts.CommandTimeout)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []engine.NativeDecision
	for _, d := range c.resent(r.Pending, r.cut) {
		out = append(out, d.view())
	}
	if len(out) > 0 {
		c.wake()
	}
	return out, nil
}
