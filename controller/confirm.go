package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/scopes"
)

// confirmation is a short-lived, single-use confirmation. It binds the
// connection that asked for it, the operation, the execution, the
// generation and the stop context; any change makes it unusable (H17).
type confirmation struct {
	rec     protocol.Confirmation
	expires time.Time
	// leaf is the session leaf a recover confirmation names, read from the
	// file when it was issued, and exists whether there was a file: the
	// eligibility must be for that leaf, or for no file as the intent said.
	leaf   string
	exists bool
	// change is how the file differed from what the stop vouched for
	// when the intent was issued (historyChange): the intent names it.
	change string
}

// Confirmation bounds: at most maxConfirmations are kept in all and
// maxConfirmationsPerConn per connection, each until it expires
// (Config.ConfirmTTL, default 2 minutes) or its connection closes.
const (
	maxConfirmations        = 64
	maxConfirmationsPerConn = 8
)

var confirmable = map[string]bool{
	protocol.CmdForceStop: true, protocol.CmdRecover: true, protocol.CmdAcquireRecoveryControl: true,
}

// stopContextLocked names what a confirmation is about: the current stop
// (a force stop supersedes it; a recover needs it) or the claim's state.
func (c *Controller) stopContextLocked() string {
	if c.st.stop != nil {
		return c.st.stop.ID + "/" + c.st.stop.State
	}
	return "binding/" + c.st.binding
}

func (c *Controller) issueConfirmation(ctx context.Context, k *conn, cmd *protocol.Command) (*outcome, error) {
	if k.enginePeer() {
		return nil, protocol.Refuse(protocol.CodeEnginePeer, "an engine peer may not issue confirmations")
	}
	if !confirmable[cmd.Operation] {
		return nil, protocol.Refuse(protocol.CodeConfirmation, "operation %s cannot be confirmed; use force-stop, recover or acquire-recovery-control", quoted(cmd.Operation))
	}
	members := c.memberSummary()
	// A recover names the leaf the file is on now, read like recover reads
	// it: the binding's leaf may lag the engine's last appends, and is
	// Pi's in-memory leaf when the file is missing.
	var head sessionHead
	var headErr error
	if cmd.Operation == protocol.CmdRecover {
		head, headErr = c.readHead(ctx)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cmd.Operation == protocol.CmdAcquireRecoveryControl {
		if cmd.Generation == nil || *cmd.Generation != c.st.generation {
			return nil, protocol.Refuse(protocol.CodeStaleGeneration, "the controller generation is %d", c.st.generation)
		}
	} else if r := c.checkControlLocked(k, cmd); r != nil {
		return nil, r
	}
	exec := ""
	if c.st.exec != nil {
		exec = c.st.exec.id
	}
	now := time.Now()
	if r := c.roomForConfirmationLocked(k, now); r != nil {
		return nil, r
	}
	cf := &confirmation{expires: now.Add(c.cfg.ConfirmTTL), leaf: head.leaf, exists: head.exists}
	if cmd.Operation == protocol.CmdRecover && headErr == nil && c.st.claim != nil {
		rec := c.st.claim.Record()
		cf.change = historyChange(&rec, head)
	}
	cf.rec = protocol.Confirmation{Record: protocol.RecordConfirmation, ID: newID("cf-"), Request: cmd.Request, Operation: cmd.Operation,
		State: protocol.ConfirmationIssued, Connection: k.id, Execution: exec, Generation: c.st.generation,
		StopContext: c.stopContextLocked(), Expires: cf.expires.UTC().Format(time.RFC3339)}
	cf.rec.Intent = c.intentLocked(cmd.Operation, members, head, headErr)
	sum := sha256.Sum256([]byte(strings.Join([]string{cf.rec.ID, cf.rec.Operation, cf.rec.Connection, cf.rec.Execution,
		fmt.Sprint(cf.rec.Generation), cf.rec.StopContext, cf.rec.Intent}, "\x00")))
	cf.rec.Digest = hex.EncodeToString(sum[:])
	c.confs[cf.rec.ID] = cf
	c.audit(audit.Confirmation, k, fmt.Sprintf("issued confirmation %s for %s: %s", cf.rec.ID, cmd.Operation, cf.rec.Intent),
		map[string]string{"CONFIRMATION": cf.rec.ID, "OPERATION": cmd.Operation, "STATE": protocol.ConfirmationIssued})
	return done(cf.rec), nil
}

// intentLocked is the exact text a person confirms; head (or headErr) is
// the session file as a recover will find it.
func (c *Controller) intentLocked(op, members string, head sessionHead, headErr error) string {
	x := c.st.exec
	switch op {
	case protocol.CmdForceStop:
		if c.unreleasedLocked() {
			r := c.st.claim.Record()
			return fmt.Sprintf("force stop execution %s, whose launch never released its engine: kill what its scope holds (only mosaic's held child and anchor) and withdraw the launch; no cohort proof", r.Execution)
		}
		if x == nil || x.handle == nil {
			return "force stop: no engine cohort is known; the stop will end uncertain"
		}
		if ps := c.st.pending; ps != nil {
			return fmt.Sprintf("force stop execution %s: its cohort is already proven gone (proof %s); write that proof to the claim store now; nothing is killed",
				x.id, ps.proof.Digest)
		}
		return fmt.Sprintf("force stop execution %s: kill every process in %s (%s); tool calls in flight become uncertain effects, nothing is rolled back",
			x.id, x.handle.Cohort.Unit, members)
	case protocol.CmdRecover:
		return c.recoverIntentLocked(head, headErr)
	default:
		return fmt.Sprintf("take recovery control of conversation %s at generation %d without reopening admission", c.cfg.Conversation.ID, c.st.generation+1)
	}
}

// recoverIntentLocked says what a recover would launch on: only what the
// session file holds, never the leaf the stopped engine had in memory,
// and, when the file is missing, whether that is a new session or one the
// claim says was written (then the recover refuses: sessionRefusal).
func (c *Controller) recoverIntentLocked(head sessionHead, headErr error) string {
	pre := fmt.Sprintf("recover conversation %s after the proven stop (%s): ", c.cfg.Conversation.ID, c.stopContextLocked())
	const post = "; no prompt is replayed (one the stop cut short is not sent again)"
	path := c.cfg.Conversation.Session
	var rec claims.Record
	if c.st.claim != nil {
		rec = c.st.claim.Record()
	}
	written := rec.Written
	change := historySame
	if headErr == nil {
		change = historyChange(&rec, head)
	}
	switch {
	case headErr != nil:
		return pre + fmt.Sprintf("the session file %s cannot be read (%v): the recover refuses until it can", path, headErr)
	case !head.exists && written != "":
		// Before a change: a missing file is named as missing, with the
		// session it should hold (sessionRefusal, which the recover
		// checks first too).
		return pre + fmt.Sprintf("the session file %s is missing, but the stopped execution wrote session %s there: the recover refuses until that file is back", path, written)
	case refusesChange(&rec, change):
		return pre + describeChange(&rec, head, change) + ": another writer changed the history since the stop, and the recover refuses"
	case change == historyAppended:
		// Never "the same session and leaf": what follows the vouched
		// bytes was checked by nobody, and may be the stopped engine's
		// last entries, written after the watch's last check, or another
		// writer's (after a hibernate the recover refuses them).
		return pre + fmt.Sprintf("a new execution on session %s and leaf %s, but the history changed since the stop: %s, checked by nobody (the stopped engine's last entries, or another writer's); the new engine sends them to the model as this conversation's",
			head.id, head.leaf, describeChange(&rec, head, change)) + post
	case head.exists:
		return pre + fmt.Sprintf("a new execution on the same session %s and leaf %s", head.id, head.leaf) + post
	case c.cfg.Conversation.IsClaude():
		return pre + fmt.Sprintf("a new execution on Claude session %s, which has no transcript yet", c.cfg.Conversation.SessionKey()) + post
	}
	return pre + fmt.Sprintf("a new execution that starts a new session at %s (no session file was ever written there)", path) + post
}

// memberSummary describes the cohort's current members for an intent.
func (c *Controller) memberSummary() string {
	c.mu.Lock()
	x := c.st.exec
	c.mu.Unlock()
	if x == nil || x.handle == nil {
		return "no cohort"
	}
	ms, err := x.handle.Members()
	if errors.Is(err, scopes.ErrCgroupAbsent) {
		return "its cgroup is gone: the stop proves the cohort ended from that removal if it is this execution's cgroup that went"
	}
	if err != nil {
		return "membership unreadable: " + err.Error()
	}
	if len(ms) == 0 {
		return "no process left in the engine's cgroup: the stop proves the end it observes"
	}
	parts := make([]string, 0, len(ms))
	for i, m := range ms {
		if i == 8 {
			parts = append(parts, fmt.Sprintf("and %d more", len(ms)-8))
			break
		}
		parts = append(parts, fmt.Sprintf("%d %s", m.PID, m.Comm))
	}
	return fmt.Sprintf("%d processes: %s", len(ms), strings.Join(parts, ", "))
}

func (c *Controller) answerConfirmation(ctx context.Context, k *conn, cmd *protocol.Command) (*outcome, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cf := c.confs[cmd.Confirmation]
	switch {
	case cf == nil:
		return nil, protocol.Refuse(protocol.CodeConfirmation, "no confirmation %s (never issued, or expired and forgotten)", quoted(cmd.Confirmation))
	case cf.rec.Connection != k.id:
		return nil, protocol.Refuse(protocol.CodeConfirmation, "confirmation %s was issued to another connection", cf.rec.ID)
	case cf.rec.State != protocol.ConfirmationIssued:
		return nil, protocol.Refuse(protocol.CodeConfirmation, "confirmation %s is %s, not issued", cf.rec.ID, cf.rec.State)
	case time.Now().After(cf.expires):
		cf.rec.State = protocol.ConfirmationExpired
		return nil, protocol.Refuse(protocol.CodeConfirmation, "confirmation %s expired", cf.rec.ID)
	}
	switch cmd.Answer {
	case "confirm":
		cf.rec.State = protocol.ConfirmationAnswered
	case "decline":
		cf.rec.State = protocol.ConfirmationDeclined
	default:
		return nil, protocol.Refuse(protocol.CodeConfirmation, "answer must be \"confirm\" or \"decline\", got %s", quoted(cmd.Answer))
	}
	out := cf.rec
	out.Request = cmd.Request
	c.audit(audit.Confirmation, k, fmt.Sprintf("confirmation %s %s", cf.rec.ID, cf.rec.State),
		map[string]string{"CONFIRMATION": cf.rec.ID, "STATE": cf.rec.State})
	return done(out), nil
}

// useConfirmationLocked consumes an answered confirmation for op: it must
// be this connection's, for this operation, unexpired, and still about the
// same execution, generation and stop context. Used once, whatever follows.
func (c *Controller) useConfirmationLocked(k *conn, id, op string) *protocol.Refusal {
	cf := c.confs[id]
	exec := ""
	if c.st.exec != nil {
		exec = c.st.exec.id
	}
	switch {
	case id == "" || cf == nil:
		return protocol.Refuse(protocol.CodeConfirmation, "%s needs an answered confirmation: issue-confirmation, then answer-confirmation", op)
	case cf.rec.Connection != k.id:
		return protocol.Refuse(protocol.CodeConfirmation, "confirmation %s belongs to another connection", quoted(id))
	case cf.rec.Operation != op:
		return protocol.Refuse(protocol.CodeConfirmation, "confirmation %s is for %s, not %s", id, cf.rec.Operation, op)
	case cf.rec.State == protocol.ConfirmationUsed:
		return protocol.Refuse(protocol.CodeConfirmation, "confirmation %s was already used; confirmations are single-use", id)
	case cf.rec.State != protocol.ConfirmationAnswered:
		return protocol.Refuse(protocol.CodeConfirmation, "confirmation %s is %s, not answered", id, cf.rec.State)
	case time.Now().After(cf.expires):
		cf.rec.State = protocol.ConfirmationExpired
		return protocol.Refuse(protocol.CodeConfirmation, "confirmation %s expired", id)
	case cf.rec.Generation != c.st.generation || cf.rec.Execution != exec || cf.rec.StopContext != c.stopContextLocked():
		cf.rec.State = protocol.ConfirmationExpired
		return protocol.Refuse(protocol.CodeConfirmation, "confirmation %s was issued for another state (%s); the stop context changed: confirm again", id, cf.rec.StopContext)
	}
	cf.rec.State = protocol.ConfirmationUsed
	c.audit(audit.Confirmation, k, fmt.Sprintf("confirmation %s used for %s", id, op),
		map[string]string{"CONFIRMATION": id, "STATE": protocol.ConfirmationUsed, "OPERATION": op})
	return nil
}

// roomForConfirmationLocked forgets expired confirmations and refuses a
// new one beyond the caps. Callers hold mu.
func (c *Controller) roomForConfirmationLocked(k *conn, now time.Time) *protocol.Refusal {
	mine := 0
	for id, cf := range c.confs {
		switch {
		case now.After(cf.expires):
			delete(c.confs, id)
		case cf.rec.Connection == k.id:
			mine++
		}
	}
	switch {
	case mine >= maxConfirmationsPerConn:
		return protocol.Refuse(protocol.CodeConfirmation, "this connection holds %d unexpired confirmations, the most it may; use or decline them, or wait %s for them to expire", mine, c.cfg.ConfirmTTL)
	case len(c.confs) >= maxConfirmations:
		return protocol.Refuse(protocol.CodeConfirmation, "the controller holds %d unexpired confirmations, the most it keeps; wait %s for them to expire", len(c.confs), c.cfg.ConfirmTTL)
	}
	return nil
}

// dropConfirmationsLocked forgets the confirmations of a closed
// connection: they are bound to it and no other may use them.
func (c *Controller) dropConfirmationsLocked(conn string) {
	for id, cf := range c.confs {
		if cf.rec.Connection == conn {
			delete(c.confs, id)
		}
	}
}
