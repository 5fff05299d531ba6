package pi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/protocol"
)

// Conn speaks Pi's RPC protocol over the engine's stdin and stdout. It
// correlates responses by id, maps events in wire order, keeps the turn
// tracker and holds the one dispatch slot. It never closes stdin except
// in Close: Pi exits at stdin EOF, even mid-run.
type Conn struct {
	opts engine.Options
	in   *engine.Stdin
	ids  uint64
	mu   sync.Mutex
	wait map[string]chan *native
	// late are the ids of commands given up on (timeout, cancel, a failed
	// write), no longer in wait: an engine that never answers must not
	// grow wait by one per command, and an answer that comes after all is
	// taken quietly, as it was when the waiter still stood.
	late *engine.Recent[struct{}]
	// dialogs are the native dialogs open on the engine (dialogs.go).
	dialogs map[string]dialog
	dseq    uint64
	// changed is closed and replaced when a dialog opens or closes
	// (Changed).
	changed chan struct{}
	tr      *tracker
	mp      *mapper
	*engine.Output
	// synced is closed once the reader passed the first LF (at once
	// without Options.Resume); skipped counts the bytes it skipped.
	synced  chan struct{}
	skipped int64
	// seed is the id of Resync's get_state: its answer sets the tracker's
	// run state in wire order.
	seed string
	// announced are the entries and tool results Pi announced as it
	// appended them, and notes the custom messages (announced.go,
	// Entries.Announced).
	announced *engine.Recent[json.RawMessage]
	notes     []note
}

// New starts reading the engine's stdout (r) and returns a Conn that
// writes commands to its stdin (w). The caller owns the process; New
// starts two goroutines that end when r reaches EOF or fails.
func New(r io.Reader, w io.WriteCloser, opts engine.Options) (*Conn, error) {
	if opts.Execution == "" {
		return nil, errors.New("engine: Options.Execution is required")
	}
	if opts.CommandTimeout <= 0 {
		opts.CommandTimeout = engine.DefaultCommandTimeout
	}
	if opts.AbortTimeout <= 0 {
		opts.AbortTimeout = engine.DefaultAbortTimeout
	}
	c := &Conn{
		opts:    opts,
		wait:    make(map[string]chan *native),
		late:    engine.NewRecent[struct{}](maxLate),
		dialogs: make(map[string]dialog),
		changed: make(chan struct{}),
		tr:      newTracker(),
		mp:      newMapper(opts.Execution),
		Output:  engine.NewOutput(opts.SeqBase, opts.MaxQueued),
		synced:  make(chan struct{}),

		announced: engine.NewRecent[json.RawMessage](maxAnnounced),
	}
	c.in = engine.NewStdin(w, opts.StdinTimeout, c.stdinBroken)
	c.mp.seq = opts.SeqBase
	if opts.LineLimit == 0 {
		opts.LineLimit = engine.DefaultLineLimit
	}
	lr := engine.NewLineReader(r, opts.MaxLine)
	lr.Reduce(opts.LineLimit)
	if opts.Resume {
		lr.SkipPartial(func(n int64) {
			c.mu.Lock()
			c.skipped = n
			c.mu.Unlock()
			close(c.synced)
		})
	} else {
		close(c.synced)
	}
	go engine.ReadLines(lr, c.handle, func(reason string, err error) { c.lose(reason, "", err) }, c.finish)
	return c, nil
}

// State returns a snapshot of the turn tracker.
func (c *Conn) State() TurnState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tr.snapshot()
}

// Close closes the engine's stdin, which makes Pi exit (even mid-run).
// Only the controller's deliberate shutdown calls it. It never waits for
// a write in progress: an engine that stopped reading its stdin holds
// that write until its deadline, and closing the writer is what ends it
// at once (the controller's end of the stdin socket pair is
// non-blocking, so the poller wakes the blocked write with an error).
func (c *Conn) Close() error {
	if err := c.in.Close(); err != nil {
		return fmt.Errorf("close engine stdin: %w", err)
	}
	return nil
}

// StdinBroken returns the write that broke the engine's stdin (timed out
// or cut short), nil while it is whole: nothing more is written to Pi.
func (c *Conn) StdinBroken() error { return c.in.Broken() }

// stdinBroken tells the controller, in wire order, that nothing more
// reaches Pi: an unavailable event with reason stdin-broken.
func (c *Conn) stdinBroken(error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.push(c.mp.unavailable(protocol.ReasonStdinBroken, ""))
}

// lose emits an unavailable event for a line the adapter could not read
// and marks the binding uncertain: its content is gone.
func (c *Conn) lose(reason, nativeType string, cause error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tr.markUncertain(reason + ": " + cause.Error())
	c.push(c.mp.unavailable(reason, nativeType))
}

func (c *Conn) handle(line []byte, clip *engine.Clip) {
	n, err := decodeLine(line)
	if err != nil {
		c.lose(protocol.ReasonUndecodable, "", err)
		return
	}
	n.clip = clip
	c.mu.Lock()
	defer c.mu.Unlock()
	if n.Type == "response" {
		c.tr.respond(n)
		if c.seed != "" && n.ID == c.seed {
			c.seed = ""
			c.tr.adopt(n)
		}
		ch, ok := c.wait[n.ID]
		if _, late := c.late.Get(n.ID); !ok && late && n.ID != "" {
			c.late.Delete(n.ID)
			return
		}
		if !ok || n.ID == "" {
			c.push(c.mp.unavailable("uncorrelated-response", "response/"+n.Command))
			return
		}
		delete(c.wait, n.ID)
		ch <- n
		return
	}
	c.tr.observe(n)
	c.announce(n)
	if n.Type == "extension_ui_request" {
		c.uiEvent(line, n)
		return
	}
	for _, e := range c.mp.mapNative(n) {
		c.push(e)
	}
}

// push queues an event; c.mu is held, so events keep wire order.
func (c *Conn) push(e protocol.Event) { c.Push(e) }

func (c *Conn) finish(err error) {
	// The cause is recorded before any waiting command wakes to read it.
	c.End(err)
	c.mu.Lock()
	engine.CloseWaiters(c.wait)
	c.mu.Unlock()
}

func (c *Conn) newID(prefix string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ids++
	return c.opts.IDPrefix + prefix + strconv.FormatUint(c.ids, 10)
}

// register makes a waiter for id; c.mu is held.
func (c *Conn) register(id string) (chan *native, error) {
	select {
	case <-c.Done():
		return nil, engine.ErrClosed
	default:
	}
	ch := make(chan *native, 1)
	c.wait[id] = ch
	return ch, nil
}

// maxLate bounds the ids of commands given up on that Conn remembers
// (late).
const maxLate = 256

// abandon forgets the waiter of a command given up on; an answer that
// comes after all is taken quietly while its id is remembered.
func (c *Conn) abandon(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.abandonLocked(id)
}

// abandonLocked is abandon; c.mu is held.
func (c *Conn) abandonLocked(id string) {
	if _, ok := c.wait[id]; ok {
		delete(c.wait, id)
		c.late.Put(id, struct{}{})
	}
}

// send writes one record, whole or not at all once the stdin broke
// (engine.Stdin: its errors are refusals wrapping ErrStdinBroken).
func (c *Conn) send(v any) error {
	rec, err := encodeRecord(v)
	if err != nil {
		return err
	}
	return c.in.Write(rec)
}

// await waits for the response to id.
func (c *Conn) await(ctx context.Context, id, cmd string, ch chan *native, timeout time.Duration) (*native, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case n, ok := <-ch:
		if !ok {
			return nil, fmt.Errorf("%s %s: %w", cmd, id, engine.ErrClosed)
		}
		return n, nil
	case <-t.C:
		return nil, fmt.Errorf("%s %s after %s: %w", cmd, id, timeout, engine.ErrTimeout)
	case <-ctx.Done():
		return nil, fmt.Errorf("%s %s: %w", cmd, id, ctx.Err())
	}
}

// call sends one command built by mk(id) and returns its successful
// response; a refusal is a *NativeError.
func (c *Conn) call(ctx context.Context, cmd string, timeout time.Duration, mk func(id string) any) (*native, error) {
	id := c.newID(cmd + "-")
	c.mu.Lock()
	ch, err := c.register(id)
	c.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cmd, err)
	}
	if err := c.send(mk(id)); err != nil {
		c.abandon(id)
		return nil, fmt.Errorf("%s: %w", cmd, err)
	}
	n, err := c.await(ctx, id, cmd, ch, timeout)
	if err != nil {
		c.abandon(id)
		return nil, err
	}
	if n.Success == nil || !*n.Success {
		return n, &engine.NativeError{Command: cmd, ID: id, Text: n.Error}
	}
	return n, nil
}

// Prompt dispatches text as one prompt record, never with
// streamingBehavior. It refuses before writing when the text breaks the
// slash policy (text-policy), is not UTF-8 (malformed), or the slot is
// taken or the engine visibly running (busy), or admission is fenced. A
// prompt of which no byte reached Pi (its stdin broke, engine.Stdin) is
// refused engine-gone with an empty Dispatch: it was not sent. A
// refusal by Pi returns the Dispatch with receipt failed, Pi's text as
// evidence, and a *protocol.Refusal coded engine-refused wrapping a
// *NativeError. A timeout leaves the slot held with receipt
// delivery-unknown.
func (c *Conn) Prompt(ctx context.Context, text string) (engine.Dispatch, error) {
	if !utf8.ValidString(text) {
		return engine.Dispatch{}, protocol.Refuse(protocol.CodeMalformed, "prompt text is not valid UTF-8")
	}
	if err := engine.CheckText(text); err != nil {
		return engine.Dispatch{}, err
	}
	id := c.newID("prompt-")
	c.mu.Lock()
	if err := c.tr.claim(id, text); err != nil {
		c.mu.Unlock()
		return engine.Dispatch{}, err
	}
	ch, err := c.register(id)
	if err != nil {
		c.tr.release()
		c.mu.Unlock()
		return engine.Dispatch{}, protocol.Wrap(protocol.CodeEngineGone, err, "the engine is gone")
	}
	c.mu.Unlock()

	sendErr := c.send(promptCommand{Type: "prompt", ID: id, Message: text})
	var n *native
	if sendErr == nil {
		n, sendErr = c.await(ctx, id, "prompt", ch, c.opts.CommandTimeout)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if sendErr != nil && engine.Unwritten(sendErr) {
		// Not a byte reached Pi (its stdin is broken): the prompt was
		// never sent, so it does not hold the slot.
		c.abandonLocked(id)
		c.tr.release()
		return engine.Dispatch{}, sendErr
	}
	if sendErr != nil {
		c.abandonLocked(id)
		c.tr.lost(id)
		return c.dispatch(id), protocol.Wrap(protocol.CodeDeliveryUnknown, sendErr, "the engine may or may not hold the prompt")
	}
	d := c.dispatch(id)
	if n.Success == nil || !*n.Success {
		return d, protocol.Wrap(protocol.CodeEngineRefused, &engine.NativeError{Command: "prompt", ID: id, Text: n.Error}, "")
	}
	return d, nil
}

// dispatch returns a copy of the item id, held or last released; c.mu held.
func (c *Conn) dispatch(id string) engine.Dispatch {
	for _, d := range []*engine.Dispatch{c.tr.slot, c.tr.last} {
		if d != nil && d.RequestID == id {
			return *d
		}
	}
	return engine.Dispatch{RequestID: id, Receipt: protocol.ReceiptDeliveryUnknown}
}

// encodeRecord renders one command as exactly one JSONL record. Every
// string stays one JSON string: control characters (ESC included) are
// escaped, and encoding/json always escapes U+2028 and U+2029, so no byte
// of the payload can end or split the record (S7).
func encodeRecord(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode engine command: %w", err)
	}
	if bytes.IndexByte(b.Bytes()[:b.Len()-1], '\n') >= 0 {
		return nil, errors.New("encode engine command: record holds a raw LF")
	}
	return b.Bytes(), nil
}
