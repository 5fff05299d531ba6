package pi

import (
	"context"
	"fmt"
	"time"

	"github.com/mosaic-agents/mosaic/engine"
)

// Resync joins the output of a running engine (Options.Resume) at a line
// boundary and returns its state. It writes a get_state probe, so that an
// idle engine writes a LF at all; waits until the reader skipped up to the
// first LF (what came before may be the tail of a line another reader
// began: never parsed); then asks get_state again, whose answer, read as a
// whole line after that boundary, sets the turn tracker's run state in
// wire order (a run in progress stays running until its agent_settled).
// The probe's own answer may be the skipped line; nothing waits for it
// (its waiter stays registered, so a late answer is not reported as an
// uncorrelated response).
// skipped is how many bytes were skipped: more than zero means engine
// output was lost between the two readers, and views must re-read the
// history.
func (c *Conn) Resync(ctx context.Context, timeout time.Duration) (st State, skipped int64, err error) {
	if timeout <= 0 {
		timeout = c.opts.CommandTimeout
	}
	probe := c.newID("probe-")
	c.mu.Lock()
	_, err = c.register(probe)
	c.mu.Unlock()
	if err != nil {
		return st, 0, fmt.Errorf("resync: %w", err)
	}
	if err := c.send(simpleCommand{Type: "get_state", ID: probe}); err != nil {
		return st, 0, fmt.Errorf("resync: %w", err)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-c.synced:
	case <-c.Done():
		return st, 0, fmt.Errorf("resync: %w", engine.ErrClosed)
	case <-t.C:
		return st, 0, fmt.Errorf("resync: no line boundary in the engine's output after %s: %w", timeout, engine.ErrTimeout)
	case <-ctx.Done():
		return st, 0, fmt.Errorf("resync: %w", ctx.Err())
	}
	id := c.newID("get_state-")
	c.mu.Lock()
	ch, err := c.register(id)
	c.seed = id
	skipped = c.skipped
	c.mu.Unlock()
	if err != nil {
		return st, skipped, fmt.Errorf("resync: %w", err)
	}
	if err := c.send(simpleCommand{Type: "get_state", ID: id}); err != nil {
		c.abandon(id)
		return st, skipped, fmt.Errorf("resync: %w", err)
	}
	n, err := c.await(ctx, id, "get_state", ch, timeout)
	if err != nil {
		c.abandon(id)
		return st, skipped, fmt.Errorf("resync: %w", err)
	}
	if n.Success == nil || !*n.Success {
		return st, skipped, &engine.NativeError{Command: "get_state", ID: id, Text: n.Error}
	}
	return st, skipped, decodeData(n, "get_state", &st)
}
