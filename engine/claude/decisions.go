package claude

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/protocol"
)

// maxDecisions bounds the permission requests an execution keeps, and
// engine.MaxDecisionBytes the bytes they hold, as Pi's adapter bounds its
// open dialogs: the settled ones (answered, cancelled) are forgotten
// first; past either with the pending ones alone, a request is answered
// with an error like an unsupported one, never allowed and never kept.
const maxDecisions = 256

// maxNativeID bounds the request id and the tool use id of a request
// kept: the CLI writes a UUID and the API a toolu_ id (36 and about 30
// bytes), and the controller keeps the decision id they make for each of
// the 256 approvals it holds, closed ones too, after the adapter forgot
// them. A longer one is answered with an error, never kept. It is the
// bound on every id an adapter remembers (engine.MaxRecentKey).
const maxNativeID = engine.MaxRecentKey

// denyMessage is what the model reads as the tool result of a denial.
const denyMessage = "The user denied this tool use in mosaic."

// decision is one can_use_tool request and what became of it.
type decision struct {
	engine.NativeDecision
	requestID string
}

// bytes is what d holds against engine.MaxDecisionBytes: its strings as
// decoded and its input (the request id twice, in ID too; the choices,
// state and answer are the adapter's own).
func (d *decision) bytes() int {
	return len(d.requestID) + len(d.ID) + len(d.ToolName) + len(d.ToolUseID) + len(d.Input) + len(d.Title) + len(d.Message)
}

func (d *decision) view() engine.NativeDecision {
	v := d.NativeDecision
	v.Choices = slices.Clone(v.Choices)
	return v
}

// controlRequest handles a request from the CLI; c.mu is held. Only
// can_use_tool is served; anything else is answered with an error (the
// CLI would otherwise wait for ever) and shown unavailable. cut says
// framing reduced the line.
func (c *Conn) controlRequest(f *frame, cut bool) {
	var sub struct {
		Subtype string `json:"subtype"`
	}
	_ = json.Unmarshal(f.Request, &sub)
	if sub.Subtype != "can_use_tool" {
		c.refuse(f.RequestID, "control_request/"+sub.Subtype, refusal{protocol.ReasonUnsupportedNative, "not supported by mosaic"})
		return
	}
	if c.knownRequest(f.RequestID) || c.wasAnswered(f.RequestID) {
		// The CLI asked again under a request id it asked under
		// before: the first keeps it (or was answered already), and
		// nothing is answered, since an answer names only the request
		// id and would settle the first (or answer it twice).
		c.push(c.mp.unavailable(protocol.ReasonDuplicateID, "control_request/"+sub.Subtype))
		return
	}
	if c.takeRequest(f, cut) != nil {
		c.wake()
	}
}

// resent takes the permission requests the CLI re-sends in an initialize
// answer (pending_permission_requests) as it takes live ones: each is
// kept, or, refused by the bounds, answered with an error, since the CLI
// waits on every one of them as on a live one. A request kept already
// is the same request again, and one this execution answered (refused,
// or decided and then forgotten) is not answered again: the answer was
// written, and the CLI wrote its list before reading it. cut says
// framing reduced the answer's line. It returns the decisions kept;
// c.mu is held.
func (c *Conn) resent(pending []frame, cut bool) []*decision {
	var kept []*decision
	for i := range pending {
		f := &pending[i]
		if c.wasAnswered(f.RequestID) {
			continue
		}
		if d := c.known(f.RequestID); d != nil {
			kept = append(kept, d)
			continue
		}
		if d := c.takeRequest(f, cut); d != nil {
			kept = append(kept, d)
		}
	}
	return kept
}

// takeRequest keeps a can_use_tool request whose request id is new as a
// decision, or refuses it (answered with an error, shown unavailable,
// never kept) and returns nil; c.mu is held.
func (c *Conn) takeRequest(f *frame, cut bool) *decision {
	d, no := c.addDecision(f, cut)
	if d == nil {
		c.refuse(f.RequestID, "control_request/can_use_tool", no)
	}
	return d
}

// refusal is why a request from the CLI is answered with an error: the
// unavailable event's reason and the error text the CLI reads.
type refusal struct{ reason, text string }

// refuse answers request id with an error, at most once, and shows the
// request unavailable; c.mu is held. The answer is queued for the
// Conn's one writer (writeRefusals), never written here: the CLI may be
// blocked writing to us, not reading, and the reader must go on. The
// queue holds the id and the error text alone, at most maxRefusals of
// them; past that (a CLI that asks faster than it reads its stdin) the
// answer is dropped and the turn marked uncertain, as output lost is:
// the CLI may wait on that request for ever. A request without an id
// cannot be answered at all, and one whose id is over maxNativeID is not
// answered either: an answer under a cut id would name another request
// id (perhaps a live request's), and the whole id is the CLI's own bytes
// of any length, which an answer would hold until written; the CLI
// writes UUIDs, so only a CLI gone astray waits on it, the turn marked
// uncertain.
func (c *Conn) refuse(id, native string, no refusal) {
	c.push(c.mp.unavailable(no.reason, native))
	switch {
	case id == "" || c.wasAnswered(id):
		return
	case len(id) > maxNativeID:
		c.tr.markUncertain(fmt.Sprintf("%s: a request id over %d bytes is left unanswered", label(native), maxNativeID))
		return
	}
	select {
	case c.refusals <- refusalAnswer{id: id, text: no.text}:
		c.answered.Put(answerKey(id), struct{}{})
	default:
		c.tr.markUncertain(fmt.Sprintf("%s: %d answers already wait to be written (the CLI does not read its stdin); the request is left unanswered", label(native), maxRefusals))
	}
}

// maxRefusals bounds the error answers waiting for the writer: each
// holds a request id of at most maxNativeID bytes and a refusal text of
// about twice that, so the queue holds under 1 MiB however many
// requests a CLI that stopped reading its stdin refuses to take.
const maxRefusals = 256

// refusalAnswer is what an error answer needs, waiting to be written.
type refusalAnswer struct{ id, text string }

// writeRefusals is the Conn's one writer of error answers: it writes
// them in the order refused until Close, or once the CLI's output ended
// and the queue is empty. A write blocked on a CLI that does not read
// holds this one goroutine, never one per request; Close wakes it.
func (c *Conn) writeRefusals() {
	write := func(a refusalAnswer) {
		_ = c.send(map[string]any{"type": "control_response", "response": map[string]any{
			"subtype": "error", "request_id": a.id, "error": a.text}})
	}
	for {
		select {
		case a := <-c.refusals:
			write(a)
		case <-c.closing:
			return
		case <-c.Done():
			for {
				select {
				case a := <-c.refusals:
					write(a)
				default:
					return
				}
			}
		}
	}
}

// maxAnswered bounds the request ids remembered as answered: an id is
// only asked again in the moment between the answer's write and the
// CLI's read of it (a re-attach's initialize answer listing it), so the
// latest thousands are far more than can be in flight.
const maxAnswered = engine.MaxToolKeys

// answerKey is what c.answered remembers of a request id: its digest,
// so a refused id of any length is remembered in 32 bytes.
func answerKey(id string) string {
	sum := sha256.Sum256([]byte(id))
	return string(sum[:])
}

// wasAnswered reports whether this execution wrote an answer to request
// id already (a decision, or a refusal); c.mu is held.
func (c *Conn) wasAnswered(id string) bool {
	_, ok := c.answered.Get(answerKey(id))
	return ok
}

// known returns the kept decision with request id id, or nil; c.mu is
// held.
func (c *Conn) known(id string) *decision {
	for _, d := range c.dec {
		if d.requestID == id {
			return d
		}
	}
	return nil
}

// knownRequest reports whether a kept decision has request id id; c.mu
// is held.
func (c *Conn) knownRequest(id string) bool { return c.known(id) != nil }

// addDecision registers a can_use_tool frame (live, or re-sent in an
// initialize answer) whose request id no kept decision has; c.mu is
// held. A request whose line framing had to cut offers deny only: allow
// sends the input back as updatedInput, which the CLI runs, and a cut
// input would run something the model never asked for and nobody saw
// whole. A nil decision is never kept, and the caller answers it with an
// error saying no.
func (c *Conn) addDecision(f *frame, cut bool) (_ *decision, no refusal) {
	var r canUseTool
	if f.Type != "control_request" || json.Unmarshal(f.Request, &r) != nil || r.Subtype != "can_use_tool" || f.RequestID == "" {
		return nil, refusal{protocol.ReasonUnsupportedNative, "not supported by mosaic"}
	}
	if len(f.RequestID) > maxNativeID || len(r.ToolUseID) > maxNativeID {
		return nil, refusal{protocol.ReasonUnsupportedNative, fmt.Sprintf("mosaic refuses a permission request whose request id or tool use id is over %d bytes", maxNativeID)}
	}
	pair := f.RequestID + "/" + r.ToolUseID
	if slices.ContainsFunc(c.dec, func(d *decision) bool { return d.requestID+"/"+d.ToolUseID == pair }) {
		// Another request id whose ids read the same ("r/x" and tool
		// "t", "r" and tool "x/t"): two approvals a user cannot tell
		// apart, each answering another request.
		return nil, refusal{protocol.ReasonDuplicateID, "mosaic refuses a permission request whose decision id " + pair + " another one has"}
	}
	// The id is unique for the Conn's life (and across re-attaches, by
	// the prefix): a request asked again under the same ids once its
	// decision was forgotten, with another input, is a new decision the
	// controller shows anew, and an allow of the approval shown for the
	// first can never answer it (Decide finds no such id).
	id := pair + "#" + c.opts.IDPrefix + strconv.FormatUint(c.dseq+1, 10)
	title := r.Description
	if title == "" {
		title = r.DisplayName
	}
	d := &decision{requestID: f.RequestID, NativeDecision: engine.NativeDecision{
		ID: id, Kind: "permission",
		ToolName: r.ToolName, ToolUseID: r.ToolUseID, Input: r.Input,
		Title: title, Message: r.DecisionReason,
		Choices: []string{engine.ChoiceAllowOnce, engine.ChoiceDeny},
		State:   engine.DecisionPending,
	}}
	if cut {
		d.Choices = []string{engine.ChoiceDeny}
		d.Message = "the request was too large to show whole; it can only be denied"
	}
	if !c.makeRoom(d) {
		return nil, refusal{protocol.ReasonUnsupportedNative, fmt.Sprintf("mosaic holds %d pending permission requests or %d bytes of them already", maxDecisions, engine.MaxDecisionBytes)}
	}
	c.dseq++
	c.dec = append(c.dec, d)
	return d, refusal{}
}

// makeRoom keeps the decisions within maxDecisions and
// engine.MaxDecisionBytes with d added, forgetting the oldest settled
// ones first. False, nothing forgotten, when the pending ones and d
// alone pass a bound. c.mu is held.
func (c *Conn) makeRoom(d *decision) bool {
	pending, pendingBytes, held := 0, d.bytes(), d.bytes()
	for _, k := range c.dec {
		held += k.bytes()
		if k.State == engine.DecisionPending {
			pending++
			pendingBytes += k.bytes()
		}
	}
	if pending >= maxDecisions || pendingBytes > engine.MaxDecisionBytes {
		return false
	}
	for len(c.dec) >= maxDecisions || held > engine.MaxDecisionBytes {
		i := slices.IndexFunc(c.dec, func(k *decision) bool { return k.State != engine.DecisionPending })
		held -= c.dec[i].bytes()
		c.dec = slices.Delete(c.dec, i, i+1)
	}
	return true
}

// cancelDecision resolves a request the CLI withdrew; c.mu is held.
func (c *Conn) cancelDecision(requestID string) {
	for _, d := range c.dec {
		if d.requestID == requestID && d.State == engine.DecisionPending {
			d.State, d.Answer = engine.DecisionCancelled, "control_cancel_request"
			c.wake()
			return
		}
	}
}

// wake tells Changed's waiters; c.mu is held.
func (c *Conn) wake() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// Decisions lists this execution's permission requests, in arrival order.
func (c *Conn) Decisions() []engine.NativeDecision {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]engine.NativeDecision, 0, len(c.dec))
	for _, d := range c.dec {
		out = append(out, d.view())
	}
	return out
}

// Decide answers decision id with allow-once or deny, once. Allow sends
// the model's own input back as updatedInput (the CLI runs updatedInput,
// DIGEST §5: never anything else) and no updatedPermissions, so nothing
// widens. The same answer again is a no-op; another answer refuses
// conflicting-request; a cancelled or unknown decision refuses no-turn.
func (c *Conn) Decide(ctx context.Context, id, choice string) error {
	c.mu.Lock()
	var d *decision
	for _, x := range c.dec {
		if x.ID == id {
			d = x
		}
	}
	switch {
	case d == nil:
		c.mu.Unlock()
		return protocol.Refuse(protocol.CodeNoTurn, "no permission request %q in this execution", id)
	case !slices.Contains(d.Choices, choice):
		c.mu.Unlock()
		return protocol.Refuse(protocol.CodeUnsupported, "choice %q is not offered (only %v)", choice, d.Choices)
	case d.State == engine.DecisionAnswered && d.Answer == choice:
		c.mu.Unlock()
		return nil
	case d.State == engine.DecisionAnswered:
		c.mu.Unlock()
		return protocol.Refuse(protocol.CodeConflictingRequest, "permission request %q was already answered %s", id, d.Answer)
	case d.State == engine.DecisionCancelled:
		c.mu.Unlock()
		return protocol.Refuse(protocol.CodeNoTurn, "permission request %q was cancelled by the engine", id)
	}
	d.State, d.Answer = engine.DecisionAnswered, choice
	c.answered.Put(answerKey(d.requestID), struct{}{})
	c.wake()
	c.mu.Unlock()
	body := map[string]any{"behavior": "deny", "message": denyMessage, "toolUseID": d.ToolUseID}
	if choice == engine.ChoiceAllowOnce {
		input := d.Input
		if len(input) == 0 {
			input = json.RawMessage("{}")
		}
		body = map[string]any{"behavior": "allow", "updatedInput": input, "toolUseID": d.ToolUseID}
	}
	err := c.send(map[string]any{"type": "control_response", "response": map[string]any{
		"subtype": "success", "request_id": d.requestID, "response": body}})
	switch {
	case err != nil && engine.Unwritten(err):
		return err // engine-gone: not a byte of the answer was written
	case err != nil:
		return protocol.Wrap(protocol.CodeDeliveryUnknown, err, "the answer to %q may or may not have reached the engine", id)
	}
	return nil
}
