package controller

import (
	"context"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/protocol"
)

// maxPromptChars is the contract's string cap (262144 characters).
const maxPromptChars = 262144

// prompt admits and dispatches one prompt. Admission and dispatch both
// recheck binding state, open admission, controller and generation,
// execution and the text policy; dispatch does it again under the
// dispatch lock, right before the one engine write (brief §1).
func (c *Controller) prompt(ctx context.Context, k *conn, cmd *protocol.Command) (*outcome, error) {
	if r := c.admit(k, cmd); r != nil {
		return nil, r
	}
	c.audit(audit.Admission, k, fmt.Sprintf("admitted prompt %s (%d characters)", cmd.Request, utf8.RuneCountInString(cmd.Text)),
		map[string]string{"REQUEST": cmd.Request, "COMMAND": "prompt"})
	run(c.test.afterAdmit)
	c.dispatch.Lock()
	defer c.dispatch.Unlock()
	if r := c.admit(k, cmd); r != nil {
		return nil, protocol.Refuse(protocol.CodeDispatchRefused, "refused at dispatch, nothing was written: %s: %s", r.Code, r.Message)
	}
	c.mu.Lock()
	x, gen := c.st.exec, c.st.generation
	c.mu.Unlock()
	d, err := x.conn.Prompt(ctx, cmd.Text)
	rec := protocol.Receipt{Record: protocol.RecordReceipt, ID: newID("rc-"), Request: cmd.Request, Command: protocol.CmdPrompt,
		Revision: 1, Execution: x.id, Generation: gen, Actor: Actor, Connection: k.id, Digest: fingerprint(cmd)}
	var native *engine.NativeError
	switch {
	case err == nil:
		rec.State = protocol.ReceiptAcknowledged
	case errors.As(err, &native) || d.Receipt == protocol.ReceiptFailed:
		// Pi refused it (N6): failed, with Pi's words; the text stays with
		// the client for an explicit resend.
		rec.State, rec.Evidence = protocol.ReceiptFailed, d.Evidence
	case d.Receipt == protocol.ReceiptDeliveryUnknown:
		rec.State, rec.Reason = protocol.ReceiptDeliveryUnknown, err.Error()
	default:
		// Refused by the engine connection before writing (busy, fenced,
		// policy): nothing reached the engine.
		return nil, err
	}
	c.audit(audit.Receipt, k, fmt.Sprintf("prompt %s %s", cmd.Request, rec.State),
		map[string]string{"REQUEST": cmd.Request, "RECEIPT": rec.ID, "STATE": rec.State, "EXECUTION": x.id, "GENERATION": fmt.Sprint(gen)})
	return done(rec), nil
}

// admit runs the admission checks; nil admits.
func (c *Controller) admit(k *conn, cmd *protocol.Command) *protocol.Refusal {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r := c.checkControlLocked(k, cmd); r != nil {
		return r
	}
	if r := c.admissionLocked(); r != nil {
		return r
	}
	if cmd.Text == "" || utf8.RuneCountInString(cmd.Text) > maxPromptChars {
		return protocol.Refuse(protocol.CodeDraft, "a prompt needs 1 to %d characters", maxPromptChars)
	}
	if err := engine.CheckText(cmd.Text); err != nil {
		return asRefusal(err)
	}
	ts := c.st.exec.conn.State()
	if ts.Running || ts.Slot != nil {
		return protocol.Refuse(protocol.CodeBusy, "the engine is busy with a turn; there is no queue in this version, so the text stays with you")
	}
	return nil
}
