package controller

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/protocol"
)

// eligibility is a single-use permission to launch, from a recover.
type eligibility struct {
	rec  protocol.Eligibility
	keys claims.Keys
	used bool
}

// recover reports eligibility only (Q15): a proven stop, an exact
// confirmation and the same pins. Nothing launches here (K6). Effects
// need no check of their own: a stop this controller ran lists every
// tool call still open in the engine's stream as an uncertain effect
// (effectReport), and none is ever counted as rolled back. A stop
// concluded after a restart had no engine stream to read, so its report
// lists none.
func (c *Controller) recover(ctx context.Context, k *conn, cmd *protocol.Command) (*outcome, error) {
	// Who asks, and whether there is a proven stop to recover from, before
	// anything is prepared: spec empties and rebuilds the engine's agent
	// directory, which a client without control (an engine's own tool
	// among them) must not make happen, least of all under a running
	// engine. Asked again below, once the reads are done.
	c.mu.Lock()
	_, r := c.recoverableLocked(k, cmd)
	c.mu.Unlock()
	if r != nil {
		return nil, r
	}
	cv, specErr := c.settings()
	var spec engine.Spec
	if specErr == nil {
		spec, specErr = c.spec(ctx, cv)
	}
	head, headErr := c.readHead(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	rec, r := c.recoverableLocked(k, cmd)
	if r != nil {
		return nil, r
	}
	if specErr != nil {
		return nil, specErr
	}
	if pins := pinsOf(cv, spec); pins != rec.Pins {
		return nil, pinRefusal(rec.Pins, pins)
	}
	if headErr != nil {
		return nil, protocol.Wrap(protocol.CodeTarget, headErr, "")
	}
	keys := c.keys(head)
	if r := c.sessionRefusal(&rec, head, keys); r != nil {
		return nil, r
	}
	change := historyChange(&rec, head)
	if refusesChange(&rec, change) {
		return nil, changedRefusal(&rec, head, change)
	}
	keys.Session = rec.Session
	if cf := c.confs[cmd.Confirmation]; cf != nil && cf.rec.Connection == k.id && (cf.leaf != head.leaf || cf.exists != head.exists || cf.change != change) {
		// The confirmation's intent named what the file held then (a leaf,
		// or a new session, and whether it grew past what the stop
		// vouched for): anything else is not what was confirmed.
		cf.rec.State = protocol.ConfirmationExpired
		return nil, protocol.Refuse(protocol.CodeTarget, "the session file changed since the confirmation (leaf %s, now %s): confirm again", orNone(cf.leaf), orNone(head.leaf))
	}
	if r := c.useConfirmationLocked(k, cmd.Confirmation, protocol.CmdRecover); r != nil {
		return nil, r
	}
	stop := ""
	if c.st.stop != nil {
		stop = c.st.stop.ID
	}
	e := &eligibility{keys: keys, rec: protocol.Eligibility{Record: protocol.RecordEligibility, ID: newID("el-"), Request: cmd.Request,
		Conversation: c.cfg.Conversation.ID, Stop: stop, ProofDigest: rec.Proof.Digest, SessionID: head.id,
		Leaf: head.leaf, Generation: c.st.generation}}
	c.keepEligibilityLocked(e)
	c.audit(audit.Confirmation, k, fmt.Sprintf("recover: eligibility %s on leaf %q after proof %s", e.rec.ID, head.leaf, rec.Proof.Digest),
		map[string]string{"ELIGIBILITY": e.rec.ID, "PROOF_DIGEST": rec.Proof.Digest})
	return done(e.rec), nil
}

// refusesChange says whether a recover refuses the session file's
// change since the stop (historyChange). A file that no longer begins
// with the bytes the stop vouched for (an entry rewritten in place, the
// file shortened or replaced) is refused after any stop: no engine of
// this conversation rewrites its file (the watch would have called it
// foreign), so that history is not the one the operator last saw. Bytes
// appended after a hibernate are refused too: no engine ran, so they are
// another writer's, and an appended user message is as forged as a
// rewritten one. Bytes appended after another stop are not refused: a
// force stop can end an engine between its last append and the watch's
// next check, so they may be its own; the intent names them instead
// (recoverIntentLocked), as the foreign-writer way out always allowed.
// A refusal and not only an intent, because the recover verb is itself
// the consent: it prints the intent as it launches.
func refusesChange(rec *claims.Record, change string) bool {
	return change == historyRewritten || change == historyAppended && rec.Policy == claims.PolicyHibernate
}

// changedRefusal is the refusal of a change refusesChange refuses, with
// the ways on: put the recorded bytes back (for an append, cut the file
// to the recorded size), or start afresh as freshConversation says, in a
// new, empty session (docs/recovery.md; spelt out there, since refusals
// are cut at 512 bytes). Not a copy of the changed file under a new
// conversation: it keeps the header id, whose claim key is this
// conversation's stopped claim, which another conversation never
// recovers.
func changedRefusal(rec *claims.Record, head sessionHead, change string) *protocol.Refusal {
	back := "Put the recorded bytes back"
	if change == historyAppended {
		back = fmt.Sprintf("Cut the file back to its first %d bytes", rec.Vouched.Size)
	}
	return protocol.Refuse(protocol.CodeTarget,
		"%s: another writer changed the history since the stop, and a recover would send it to the model as this conversation's. %s to recover, or start afresh in a new session (docs/recovery.md: the session history changed since the stop)",
		describeChange(rec, head, change), back)
}

// sessionRefusal says why a launch on keys, for the stopped claim rec,
// would not continue the session rec is about (nil when it would). A
// claim keyed new:<conversation> matches a missing file only while no
// session was ever seen there (rec.Written): once one was, a missing file
// means the history is elsewhere, and Pi, given the path, would start a
// new, empty session under a new id while the recover said it resumed.
func (c *Controller) sessionRefusal(rec *claims.Record, head sessionHead, keys claims.Keys) *protocol.Refusal {
	cv := c.cfg.Conversation
	path := cv.Session
	switch {
	case rec.Written != "" && !head.exists:
		return protocol.Refuse(protocol.CodeTarget,
			"session %s, which the stopped engine wrote to %s, is missing there: recover would start a new, empty session. Put the file back to recover it, or start afresh: %s",
			rec.Written, path, freshConversation(cv))
	case rec.Written != "" && head.id != rec.Written:
		return protocol.Refuse(protocol.CodeTarget,
			"session %s, which the stopped engine wrote to %s, is not there (the file holds %s). Put that file back to recover it, or start afresh: %s",
			rec.Written, path, head.id, freshConversation(cv))
	case rec.Session == keys.Session, head.exists && rec.Session == "new:"+cv.ID:
		return nil
	case !head.exists:
		return protocol.Refuse(protocol.CodeTarget,
			"session %s, the stopped claim's, is missing from %s. Put the file back to recover it, or start afresh: %s",
			rec.Session, path, freshConversation(cv))
	}
	return protocol.Refuse(protocol.CodeTarget, "the session file %s now has header %s; the claim was for %s", path, head.id, rec.Session)
}

// freshConversation is the way to a new session instead of the one a
// conversation lost. The conversation id is derived from the project, the
// seat and the session file's name, so the new session needs another
// name, and the old conversation goes first: its seat is the one the new
// conversation takes. Refusals are cut at 512 bytes and paths are long,
// so the settings are named by the command that prints them, not spelled
// out.
func freshConversation(cv *conversations.Conversation) string {
	return fmt.Sprintf("note its settings (`mosaicctl conv show %s`), run `mosaicctl conv rm %s`, then `mosaicctl conv add` with those settings and a new --session file name",
		cv.ID, cv.ID)
}

// orNone names an empty leaf.
func orNone(leaf string) string { return cmp.Or(leaf, "none (no session file)") }

// launchCmd starts a new execution with an eligibility record: same
// session and leaf, generation +1. The cancelled prompt is not replayed:
// nothing is sent to the new engine until a client prompts (K7).
func (c *Controller) launchCmd(ctx context.Context, k *conn, cmd *protocol.Command) (*outcome, error) {
	head, err := c.readHead(ctx)
	if err != nil {
		return nil, protocol.Wrap(protocol.CodeTarget, err, "")
	}
	c.mu.Lock()
	if r := c.checkControlLocked(k, cmd); r != nil {
		c.mu.Unlock()
		return nil, r
	}
	e, _ := c.elig.get(cmd.Eligibility)
	switch {
	case e == nil || e.used:
		c.mu.Unlock()
		return nil, protocol.Refuse(protocol.CodeEligibility, "eligibility %q is unknown or was used", cmd.Eligibility)
	case e.rec.Generation != c.st.generation || c.st.binding != protocol.BindingStopped:
		c.mu.Unlock()
		return nil, protocol.Refuse(protocol.CodeEligibility, "eligibility %s is from another state; recover again", e.rec.ID)
	case head.leaf != e.rec.Leaf || head.id != e.rec.SessionID:
		c.mu.Unlock()
		return nil, protocol.Refuse(protocol.CodeTarget, "the session moved since eligibility (leaf %q, was %q)", head.leaf, e.rec.Leaf)
	}
	e.used = true
	c.st.generation++
	c.st.stop = nil
	c.st.preflight = ""
	c.st.dialogSeen = false
	c.mu.Unlock()
	// A launch is a sequence of claim writes around the scope's start: a
	// shutdown does not cut it short (Serve waits for it), since a claim
	// left reserved would need the next controller to classify it.
	if err := c.launch(context.WithoutCancel(ctx), head, e.keys, e.rec.Leaf); err != nil {
		return nil, protocol.Wrap(protocol.CodeLaunchFailed, err, "launch")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	execID := ""
	if c.st.exec != nil {
		execID = c.st.exec.id
	}
	r := protocol.Receipt{Record: protocol.RecordReceipt, ID: newID("rc-"), Request: cmd.Request, Command: protocol.CmdLaunch,
		State: protocol.ReceiptLaunched, Revision: 1, Execution: execID, Generation: c.st.generation, Actor: Actor,
		Connection: k.id, Digest: fingerprint(cmd)}
	if c.st.binding != protocol.BindingActive {
		r.State, r.Reason = protocol.ReceiptUncertain, c.st.reason
	}
	c.publishBindingLocked()
	return done(r), nil
}

// recoverableLocked is the claim record of the proven stop k may recover
// from, or why not: k holds control at the command's generation, and the
// binding is stopped with a proof that verifies.
func (c *Controller) recoverableLocked(k *conn, cmd *protocol.Command) (claims.Record, *protocol.Refusal) {
	if r := c.checkControlLocked(k, cmd); r != nil {
		return claims.Record{}, r
	}
	if c.st.binding != protocol.BindingStopped || c.st.claim == nil {
		return claims.Record{}, protocol.Refuse(protocol.CodeStopProof, "recover needs a stop proven by a cohort or boot proof; the binding is %s: %s", c.st.binding, c.wayOutLocked())
	}
	rec := c.st.claim.Record()
	if err := claims.Proven(&rec); err != nil {
		return claims.Record{}, protocol.Wrap(protocol.CodeStopProof, err, "the recorded stop does not verify")
	}
	return rec, nil
}

// pinRefusal refuses a recover whose launch would not run the engine the
// stopped execution ran, saying what changed and how to go back.
func pinRefusal(was, now claims.Pins) *protocol.Refusal {
	return protocol.Refuse(protocol.CodePinMismatch, "the engine changed since the stopped execution (%s), and a resume runs the engine it stopped: add the conversation again (`mosaicctl conv add --replace`) with its earlier --engine, --node, --provider, --model and --thinking, then recover", pinsChange(was, now))
}

// pinsChange names what differs between the pins of the stopped
// execution and a launch's now, digests cut to 12 hex digits.
func pinsChange(was, now claims.Pins) string {
	var out []string
	changed := func(what, a, b string) {
		if a != b {
			out = append(out, fmt.Sprintf("%s %s, now %s", what, cmp.Or(cutHex(a), "none"), cmp.Or(cutHex(b), "none")))
		}
	}
	changed("version", was.EngineVersion, now.EngineVersion)
	changed("binary sha256", was.BinarySHA256, now.BinarySHA256)
	changed("argv digest (the engine's path and flags)", was.ArgvDigest, now.ArgvDigest)
	return strings.Join(out, "; ")
}

func cutHex(s string) string {
	if len(s) > 12 {
		return s[:12] + "…"
	}
	return s
}
