package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/proofs"
	"github.com/mosaic-agents/mosaic/protocol"
)

// maxRequestID bounds a client request id.
const maxRequestID = 128

// handler runs one command and returns its final record, or a later.
type handler func(k *conn, cmd *protocol.Command) (any, error)

// later is what a handler returns when its record waits on the engine (an
// interrupt's settle, a force stop's kill): the command is already checked
// and fenced, in the order the connection sent it, and the rest runs off
// the connection's read loop, so the same connection can act meanwhile —
// a force stop superseding its own interrupt (H10).
type later func() (any, error)

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
		protocol.CmdApproval: func(*conn, *protocol.Command) (any, error) {
			return nil, protocol.Refuse(protocol.CodeUnsupported, "native dialogs are shown disabled in this version; nothing answers them")
		},
	}
}

// command handles one line after the hello. Only a failed write ends the
// connection; every refusal is answered and journaled.
func (c *Controller) command(k *conn, typ string, line []byte) {
	var cmd protocol.Command
	if err := protocol.Decode(line, &cmd); err != nil {
		c.refuse(k, "", asRefusal(err))
		return
	}
	if typ == protocol.CmdObserve {
		c.observe(k, &cmd)
		return
	}
	h, ok := c.handlers()[typ]
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
	rec, err := h(k, &cmd)
	if rest, ok := rec.(later); ok && err == nil {
		c.goStop(func() {
			rec, err := rest()
			c.reply(k, &cmd, rec, err)
		})
		return
	}
	c.reply(k, &cmd, rec, err)
}

// reply sends a command's final record (or its refusal) and records it
// for exact retries; a refused command is forgotten.
func (c *Controller) reply(k *conn, cmd *protocol.Command, rec any, err error) {
	if err != nil {
		c.dedupDrop(cmd.Request)
		c.refuse(k, cmd.Request, asRefusal(err))
		return
	}
	b, _ := json.Marshal(rec)
	b = append(b, '\n')
	c.dedupDone(cmd.Request, b)
	k.enqueueCtl(b)
}

// fingerprint digests the command without its request id and retry flag:
// the same content under the same id is a retry, other content a conflict.
func fingerprint(cmd *protocol.Command) string {
	fp := *cmd
	fp.Request, fp.Retry = "", false
	raw, _ := json.Marshal(fp)
	canon, err := proofs.CanonicalizeJSON(raw)
	if err != nil {
		canon = raw
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:])
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
