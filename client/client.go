package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"

	"github.com/mosaic-agents/mosaic/protocol"
)

// Default limits. A server line can be much longer than a client line: an
// observed reply carries a whole history page.
const (
	DefaultMaxLine     = 16 << 20
	DefaultQueueEvents = 8192
)

// ErrClosed is the cause of everything that fails because the connection
// ended: Close was called, or the server closed it.
var ErrClosed = errors.New("conversation connection closed")

// Options tune a connection. The zero value is ready to use.
type Options struct {
	// Name is sent as the hello's "client" so the controller's journal
	// says which program connected (e.g. "mosaicctl attach").
	Name string
	// MaxLine caps one server line in bytes (DefaultMaxLine when 0). A
	// longer line is a protocol failure: the connection ends.
	MaxLine int
	// QueueEvents bounds the events buffered for Updates while nobody
	// reads them (DefaultQueueEvents when 0). Past it the client drops
	// events and loses its place exactly as a slow connection does at the
	// server: a lost-place notice, then nothing until the next observe.
	QueueEvents int
	// Runs asks the server for runs of deltas (protocol.RunsSince): a
	// reader that fell behind then gets the deltas of a block that
	// waited for it as one event whose Texts hold them all, instead of
	// one line each. Its Updates must take such events whole
	// (protocol.Event.Deltas yields them one by one; a Transcript does
	// that itself). A server older than runs is spoken to without them.
	Runs bool
}

// speaks is the protocol a hello with these options names.
func (o Options) speaks() int {
	if o.Runs {
		return protocol.Version
	}
	return 1
}

func (o Options) maxLine() int {
	if o.MaxLine > 0 {
		return o.MaxLine
	}
	return DefaultMaxLine
}

func (o Options) queueEvents() int {
	if o.QueueEvents > 0 {
		return o.QueueEvents
	}
	return DefaultQueueEvents
}

// Client is one connection to a conversation's controller. Its methods are
// safe for concurrent use; replies are correlated by request id, so several
// requests may be in flight at once.
type Client struct {
	path    string
	opts    Options
	conn    net.Conn
	welcome protocol.Welcome

	wmu sync.Mutex // serialises writes: one line is one Write

	lines  lineDecoder // the read loop's alone
	events []item      // events read and not queued yet; the read loop's alone

	mu      sync.Mutex
	pending map[string]*pending
	// follows are prompts waiting for later revisions of their receipt.
	follows map[string]chan *protocol.Receipt
	state   State
	err     error // why the connection ended; nil while it runs
	// unaddressed is the last refusal that named no request since the
	// current write began (a line the server could not read:
	// line-too-long, buffers-full): the answer to a request whose write
	// failed part way (request.go answerOfBrokenWrite).
	unaddressed *protocol.RefusalRecord
	lastWrite   string // the request of the last line written, whole or not

	updates *queue
	done    chan struct{}
	once    sync.Once
	bound   chan struct{} // closed when the first binding is read
}

// Dial connects to the conversation socket at socketPath (see
// units.SocketPath), says hello and waits for the welcome. ctx bounds the
// dial and the handshake only; the connection then lives until Close or
// until the server ends it. A refused hello is returned as the server's
// *protocol.Refusal (peer-uid, protocol-version, ...). A full listen
// backlog is waited out until ctx ends (at most 10 s without a deadline).
func Dial(ctx context.Context, socketPath string, opts Options) (*Client, error) {
	conn, err := dialSocket(ctx, socketPath)
	if err != nil {
		return nil, fmt.Errorf("dial conversation socket %s: %w", socketPath, err)
	}
	w, lines, err := handshake(ctx, conn, opts.Name, opts.speaks(), opts.maxLine())
	if opts.Runs && protocol.CodeOf(err) == protocol.CodeProtocolVersion {
		// A controller older than runs refuses the hello and closes the
		// connection: say hello again in the protocol it speaks.
		conn.Close()
		if conn, err = dialSocket(ctx, socketPath); err != nil {
			return nil, fmt.Errorf("dial conversation socket %s: %w", socketPath, err)
		}
		w, lines, err = handshake(ctx, conn, opts.Name, 1, opts.maxLine())
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("hello on %s: %w", socketPath, err)
	}
	c := &Client{
		path:    socketPath,
		opts:    opts,
		conn:    conn,
		welcome: w,
		pending: map[string]*pending{}, follows: map[string]chan *protocol.Receipt{},
		state: State{Conversation: w.Conversation, Connection: w.Connection,
			Server: w.Server, Mode: w.Mode},
		updates: newQueue(opts.queueEvents()),
		done:    make(chan struct{}),
		bound:   make(chan struct{}),
	}
	go c.updates.pump()
	go c.run(lines)
	return c, nil
}

// Reconnect closes c and dials the same socket with the same options. The
// new connection is an observer: control is never re-acquired behind the
// caller's back, since a disconnect does not release it and the old
// connection may still be the controller of record. Requests whose outcome
// was lost can be asked about again with Resend on the new client.
func (c *Client) Reconnect(ctx context.Context) (*Client, error) {
	c.Close()
	return Dial(ctx, c.path, c.opts)
}

// Welcome returns the server's welcome record.
func (c *Client) Welcome() protocol.Welcome { return c.welcome }

// Updates returns every record the server sends after its welcome, in the
// order it sent them. The channel is closed once the connection has ended
// and the records received before that were delivered (or at once after
// Close). Read it continuously, or the client drops events beyond
// Options.QueueEvents and loses its place.
func (c *Client) Updates() <-chan Update { return c.updates.out }

// Done is closed when the connection has ended; Err then says why.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err returns why the connection ended, or nil while it runs. It wraps
// ErrClosed for an orderly end.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close ends the connection. Requests still waiting fail with an
// *OutcomeError: they were sent, and their outcome is now unknown. Updates
// not yet read are discarded.
func (c *Client) Close() error {
	c.end(ErrClosed)
	c.updates.quit()
	return nil
}

// end records why the connection ended (the first reason wins), closes it
// and fails every waiting request. It is safe to call more than once.
func (c *Client) end(err error) {
	c.once.Do(func() {
		c.mu.Lock()
		c.err = err
		waiting := c.pending
		c.pending = map[string]*pending{}
		refused, answer := c.refusedLineLocked(waiting), c.unaddressed
		c.mu.Unlock()
		c.conn.Close()
		for id, p := range waiting {
			if id == refused {
				p.resolve(nil, refusalOf(answer))
				continue
			}
			p.resolve(nil, &OutcomeError{Command: p.cmd, Err: err})
		}
		c.updates.close()
		close(c.done)
	})
}

// refusedLineLocked names the waiting request that a refusal naming no
// request answered, when the server refused a line it could not read and
// closed (line-too-long, buffers-full) after that request's line was
// written: it must be the only request still waiting, so that every other
// line was read whole (answered). Otherwise "". Callers hold mu.
func (c *Client) refusedLineLocked(waiting map[string]*pending) string {
	r := c.unaddressed
	if r == nil || len(waiting) != 1 || (r.Code != protocol.CodeLineTooLong && r.Code != protocol.CodeBuffersFull) {
		return ""
	}
	if _, ok := waiting[c.lastWrite]; !ok {
		return ""
	}
	return c.lastWrite
}
