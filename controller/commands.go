package controller

import (
	"context"
	"errors"
	"fmt"

	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/protocol"
)

// maxRequestID bounds a client request id.
const maxRequestID = 128

// handler runs one command: its final record in an outcome, or a refusal.
// ctx is the server's (Server.Serve): a shutdown cancels it, and with it
// an engine call the command already sent.
type handler func(ctx context.Context, k *conn, cmd *protocol.Command) (*outcome, error)

// outcome is what a handler returns on success. rec is the final record;
// when the record waits on the engine (an interrupt's settle, a force
// stop's kill), wait holds the rest instead: the command is already
// checked and fenced, in the order the connection sent it, and wait runs
// off the connection's read loop, so the same connection can act
// meanwhile (a force stop superseding its own interrupt, H10).
type outcome struct {
	rec  any
	wait func() protocol.Receipt
	// then runs once rec is queued for the connection: what it starts
	// (a dispatch) may send records that must follow the reply.
	then func()
}

// done is the outcome of a command whose final record is rec.
func done(rec any) *outcome { return &outcome{rec: rec} }

// deferred is the outcome of a command whose receipt wait produces.
func deferred(wait func() protocol.Receipt) *outcome { return &outcome{wait: wait} }

// handlers builds the command table; New builds it once per controller.
// observe is not in it: it is served before the gate that judges the peer
// again, since every peer may observe.
func (c *Controller) handlers() map[string]handler {
	return map[string]handler{
		protocol.CmdPrompt:                 c.prompt,
		protocol.CmdTakeover:               c.takeover,
		protocol.CmdAcquireRecoveryControl: c.acquireRecoveryControl,
		protocol.CmdInterrupt:              c.interrupt,
		protocol.CmdForceStop:              c.forceStop,
		protocol.CmdIssueConfirmation:      c.issueConfirmation,
		protocol.CmdAnswerConfirmation:     c.answerConfirmation,
		protocol.CmdRecover:                c.recover,
		protocol.CmdLaunch:                 c.launchCmd,
		protocol.CmdApproval:               c.approve,
		protocol.CmdEditQueued:             c.editQueued,
		protocol.CmdCancelQueued:           c.cancelQueued,
		protocol.CmdResumeQueue:            c.resumeQueue,
	}
}

// command handles one line after the hello. Only a failed write ends the
// connection; every refusal is answered and journaled.
func (c *Controller) command(ctx context.Context, k *conn, typ string, line []byte) {
	var cmd protocol.Command
	if err := protocol.Decode(line, &cmd); err != nil {
		c.refuse(k, "", asRefusal(err))
		return
	}
	if typ == protocol.CmdObserve {
		c.observe(k, &cmd)
		return
	}
	h, ok := c.cmds[typ]
	if !ok {
		c.refuse(k, cmd.Request, protocol.Refuse(protocol.CodeUnknownCommand, "unknown record type %s", quoted(typ)))
		return
	}
	if cmd.Request == "" || len(cmd.Request) > maxRequestID {
		c.refuse(k, "", protocol.Refuse(protocol.CodeMalformed, "a %s needs a request id of 1-%d characters", typ, maxRequestID))
		return
	}
	// Every command but observe may act: the peer is judged again now, so
	// one that moved itself out of its engine scope, or whose connecting
	// process exited, after the hello gains nothing.
	if engine, why := k.judgePeer(); engine {
		c.refuse(k, cmd.Request, protocol.Refuse(protocol.CodeEnginePeer,
			"this peer may observe, never act on the conversation: %s", why))
		return
	}
	digest := fingerprint(&cmd)
	if reply, r := c.dedupBegin(cmd.Request, digest, cmd.Retry); r != nil || reply != nil {
		if r != nil {
			c.refuse(k, cmd.Request, r)
			return
		}
		c.audit(audit.Receipt, k, fmt.Sprintf("exact retry of request %s: the same record, nothing dispatched", cmd.Request),
			map[string]string{"REQUEST": cmd.Request, "RETRY": "true"})
		k.enqueueCtl(reply)
		return
	}
	out, err := h(ctx, k, &cmd)
	run(c.test.beforeReply)
	switch {
	case err != nil:
		c.reply(k, &cmd, nil, err)
	case out.wait != nil:
		c.goStop(func() { c.reply(k, &cmd, out.wait(), nil) })
	default:
		c.reply(k, &cmd, out.rec, nil)
		run(out.then)
	}
}

// reply sends a command's final record (or its refusal) and records it
// for exact retries; a refused command is forgotten.
func (c *Controller) reply(k *conn, cmd *protocol.Command, rec any, err error) {
	if err != nil {
		c.dedupDrop(cmd.Request)
		c.refuse(k, cmd.Request, asRefusal(err))
		return
	}
	b, _ := protocol.Line(rec)
	c.dedupDone(cmd.Request, b)
	k.enqueueCtl(b)
}

// checkControlLocked is the fence every control command passes: the
// connection holds control at the generation it names, and targets the
// current execution. Callers hold mu.
func (c *Controller) checkControlLocked(k *conn, cmd *protocol.Command) *protocol.Refusal {
	if c.st.revoked[k.id] {
		return protocol.Refuse(protocol.CodeRevoked, "this connection lost control (generation is now %d); it may only observe", c.st.generation)
	}
	if c.st.controller != k.id {
		return protocol.Refuse(protocol.CodeNotController, "not admitted: this connection is an observer; take control first")
	}
	if cmd.Generation == nil || *cmd.Generation != c.st.generation {
		return protocol.Refuse(protocol.CodeStaleGeneration, "the controller generation is %d; refresh and retry", c.st.generation)
	}
	if cmd.Execution != "" && (c.st.exec == nil || cmd.Execution != c.st.exec.id) {
		return protocol.Refuse(protocol.CodeTarget, "execution %q is not the current execution", cmd.Execution)
	}
	return nil
}

func asRefusal(err error) *protocol.Refusal {
	var r *protocol.Refusal
	if errors.As(err, &r) {
		return r
	}
	return protocol.Wrap(protocol.CodeMalformed, err, "")
}
