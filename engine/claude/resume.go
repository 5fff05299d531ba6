package claude

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mosaic-agents/mosaic/engine"
)

// Resumed is what Resync learned of a running CLI: whether a turn is in
// progress (session_state running or requires_action) and the
// permission requests it still waits on.
type Resumed struct {
	SessionState string
	Running      bool
	Pending      []engine.NativeDecision
}

// initState is the part of an initialize answer Resync reads.
type initState struct {
	SessionState string `json:"session_state"`
}

// Resync joins the output of a CLI that runs already (Options.Resume) at
// a line boundary. It writes an initialize probe, so that an idle CLI
// writes a LF at all; waits until the reader skipped up to the first LF
// (what came before may be the tail of a line another reader began: never
// parsed); then sends initialize again, whose answer, read as a whole line
// after that boundary, sets the turn state in wire order: session_state
// running or requires_action is a turn in progress, which stays running
// until its result, and pending_permission_requests (the whole original
// can_use_tool frames, DIGEST §3) become decisions again. That answer
// shape is the only one the CLI was seen to give after a reconnect; any
// other session_state leaves the binding uncertain. skipped is how many
// bytes were skipped: more than zero means output was lost between the
// two readers.
func (c *Conn) Resync(ctx context.Context, timeout time.Duration) (r Resumed, skipped int64, err error) {
	if timeout <= 0 {
		timeout = c.opts.CommandTimeout
	}
	init := map[string]any{"subtype": "initialize", "hooks": nil}
	c.mu.Lock()
	probe, _ := c.registerLocked()
	c.mu.Unlock()
	// The probe's waiter stays registered: a late answer is not an
	// uncorrelated response.
	if err := c.send(map[string]any{"type": "control_request", "request_id": probe, "request": init}); err != nil {
		return r, 0, fmt.Errorf("resync: %w", err)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-c.synced:
	case <-c.Done():
		return r, 0, fmt.Errorf("resync: %w", engine.ErrClosed)
	case <-t.C:
		return r, 0, fmt.Errorf("resync: no line boundary in the CLI's output after %s: %w", timeout, engine.ErrTimeout)
	case <-ctx.Done():
		return r, 0, fmt.Errorf("resync: %w", ctx.Err())
	}
	c.mu.Lock()
	id, ch := c.registerLocked()
	c.seed = id
	skipped = c.skipped
	c.mu.Unlock()
	if err := c.send(map[string]any{"type": "control_request", "request_id": id, "request": init}); err != nil {
		c.forget(id)
		return r, skipped, fmt.Errorf("resync: %w", err)
	}
	resp, err := c.await(ctx, id, ch, timeout)
	if err != nil {
		return r, skipped, fmt.Errorf("resync: %w", err)
	}
	var st initState
	if err := json.Unmarshal(resp.Response, &st); err != nil {
		return r, skipped, fmt.Errorf("resync: initialize answer: %w", err)
	}
	r.SessionState = st.SessionState
	r.Running = st.SessionState == "running" || st.SessionState == "requires_action"
	for _, d := range c.Decisions() {
		if d.State == engine.DecisionPending {
			r.Pending = append(r.Pending, d)
		}
	}
	if !r.Running && st.SessionState != "idle" {
		return r, skipped, fmt.Errorf("resync: the CLI reports session_state %q", st.SessionState)
	}
	return r, skipped, nil
}

// applyInit takes Resync's initialize answer in wire order, before any
// later frame: a turn in progress is running (its result, read after,
// settles it), and each pending permission request is a decision again,
// deny only if framing cut the answer's line.
// Callers hold mu.
func (c *Conn) applyInit(resp *controlResponse) {
	var st initState
	if resp.Subtype != "success" || json.Unmarshal(resp.Response, &st) != nil {
		return
	}
	if (st.SessionState == "running" || st.SessionState == "requires_action") && !c.tr.running {
		c.tr.running = true
		c.tr.runs++
	}
	if len(c.resent(resp.Pending, resp.cut)) > 0 {
		c.wake()
	}
}
