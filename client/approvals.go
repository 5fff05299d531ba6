package client

import (
	"context"
	"fmt"

	"github.com/mosaic-agents/mosaic/protocol"
)

// Approvals returns the decisions still open (pending, disabled or
// uncertain), as a fresh observe answers them: the current projection of
// each, with its exact choices. It observes, so the connection's event
// feed restarts from the observed record.
func (c *Client) Approvals(ctx context.Context) ([]protocol.Approval, error) {
	obs, err := c.Observe(ctx)
	if err != nil {
		return nil, err
	}
	return obs.Approvals, nil
}

// Approve answers the approval whose current projection id is id with
// choice, exactly one of its Choices ("true" or "false" for a confirm,
// one exact label for a select); decision, when not empty, is the native
// decision it must belong to. It needs control. The reply is the
// approval-resolved record (the same one again for an identical second
// answer, which sends nothing to the engine); refusals say why nothing
// was sent (approval-choice, approval-conflict, approval-superseded,
// approval-closed, approval-unknown, not-controller, ...).
func (c *Client) Approve(ctx context.Context, id, choice, decision string) (*protocol.Approval, error) {
	cmd, err := c.command(ctx, protocol.CmdApproval, false)
	if err != nil {
		return nil, err
	}
	cmd.Approval, cmd.Choice, cmd.Decision = id, choice, decision
	r, err := c.do(ctx, cmd)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cmd.Type, err)
	}
	return r.Approval, nil
}
