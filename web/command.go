package web

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/mosaic-agents/mosaic/client"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/terminal"
)

// maxCommandBody bounds a command's body: a prompt's text and a little.
const maxCommandBody = 1 << 20

// commandTimeout bounds how long one command waits for its reply. A force
// stop waits for its proof; an interrupt for the turn to reconcile.
const commandTimeout = 2 * time.Minute

// request is what the page posts: the operation, the tab it acts through,
// and the view it acted on. Generation and Execution are the page's view,
// not the connection's latest state: a command decided on a stale view
// reaches the controller with the stale generation and is refused
// (stale-generation), so a takeover in another tab between rendering and
// clicking never lets the click act on what the person did not see.
type request struct {
	Tab          string `json:"tab"`
	Op           string `json:"op"`
	Generation   *int64 `json:"generation"`
	Execution    string `json:"execution"`
	Text         string `json:"text"`
	Operation    string `json:"operation"`
	Confirmation string `json:"confirmation"`
	Answer       string `json:"answer"`
	Eligibility  string `json:"eligibility"`
	// Approval and Choice answer a native decision: the projection id
	// the page showed and the index of the button pressed. The server
	// sends the exact label it holds for that projection (choice), so
	// what reaches the engine is the engine's own bytes.
	Approval string `json:"approval"`
	Choice   *int   `json:"choice"`
	// Item and Revision name a queued item as the page's chip showed it
	// (edit-queued, cancel-queued): compare-and-set at the controller, so
	// an item that moved on since is refused stale-item, never changed.
	Item     string `json:"item"`
	Revision *int   `json:"revision"`

	choice, decision string
}

// ops are the operations a page may ask for, each one protocol command;
// the server adds nothing a terminal client could not send.
var ops = map[string]bool{
	protocol.CmdTakeover: true, protocol.CmdAcquireRecoveryControl: true, protocol.CmdPrompt: true,
	protocol.CmdInterrupt: true, protocol.CmdIssueConfirmation: true, protocol.CmdAnswerConfirmation: true,
	protocol.CmdForceStop: true, protocol.CmdRecover: true, protocol.CmdLaunch: true,
	protocol.CmdApproval: true, protocol.CmdEditQueued: true, protocol.CmdCancelQueued: true, protocol.CmdResumeQueue: true,
}

// opOlder reads the history page before the oldest shown.
const opOlder = "older"

func (s *Server) command(w http.ResponseWriter, r *http.Request) {
	ss, ok := s.guard(w, r)
	if !ok {
		return
	}
	var req request
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxCommandBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		s.refuse(w, r, http.StatusBadRequest, protocol.Refuse(protocol.CodeMalformed, "the command is not the JSON the page sends: %v", err))
		return
	}
	t := s.tabs.get(req.Tab, ss.ID, r.PathValue("id"))
	if t == nil {
		s.refuse(w, r, http.StatusConflict, protocol.Refuse(protocol.CodeWebTab, "this tab's connection is gone (closed or timed out); reload the page"))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), commandTimeout)
	defer cancel()
	if req.Op == opOlder {
		if err := t.readOlder(ctx); err != nil {
			s.answer(w, r, nil, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"ok": true})
		return
	}
	if req.Op == protocol.CmdApproval {
		if req.Choice == nil {
			s.refuse(w, r, http.StatusBadRequest, protocol.Refuse(protocol.CodeMalformed, "an approval names the approval and the index of a choice; reload the page"))
			return
		}
		var err error
		t.mu.Lock()
		req.choice, req.decision, err = t.choiceLocked(req.Approval, *req.Choice)
		t.mu.Unlock()
		if err != nil {
			s.answer(w, r, nil, err)
			return
		}
	}
	cmd, err := commandOf(req)
	if err != nil {
		s.refuse(w, r, http.StatusBadRequest, err)
		return
	}
	reply, err := t.c.Do(ctx, cmd)
	s.answer(w, r, reply, err)
}

// commandOf builds the protocol command of a page request, addressed with
// the page's view.
func commandOf(req request) (protocol.Command, error) {
	if !ops[req.Op] {
		return protocol.Command{}, protocol.Refuse(protocol.CodeUnknownCommand, "the page asked for %q, which is no operation of this server", clip(req.Op, 40))
	}
	cmd := protocol.Command{Type: req.Op}
	if req.Op == protocol.CmdAnswerConfirmation {
		// Bound to its confirmation, which is bound to the generation.
		cmd.Confirmation, cmd.Answer = req.Confirmation, req.Answer
		return cmd, nil
	}
	if req.Generation == nil {
		return cmd, protocol.Refuse(protocol.CodeMalformed, "a %s must name the generation the page shows; reload the page", req.Op)
	}
	gen := *req.Generation
	cmd.Generation = &gen
	switch req.Op {
	case protocol.CmdPrompt:
		cmd.Execution, cmd.Text = req.Execution, req.Text
	case protocol.CmdIssueConfirmation:
		cmd.Operation = req.Operation
	case protocol.CmdForceStop, protocol.CmdRecover, protocol.CmdAcquireRecoveryControl:
		cmd.Confirmation = req.Confirmation
	case protocol.CmdLaunch:
		cmd.Eligibility = req.Eligibility
	case protocol.CmdEditQueued, protocol.CmdCancelQueued:
		if req.Item == "" || req.Revision == nil {
			return cmd, protocol.Refuse(protocol.CodeMalformed, "a %s names the item and the revision the page shows; reload the page", req.Op)
		}
		rev := *req.Revision
		cmd.Item, cmd.Revision = req.Item, &rev
		if req.Op == protocol.CmdEditQueued {
			cmd.Text = req.Text
		}
	case protocol.CmdApproval:
		// Addressed with the page's generation: a view made stale by a
		// takeover, or an observer's, is refused by the controller.
		cmd.Execution, cmd.Approval, cmd.Choice, cmd.Decision = req.Execution, req.Approval, req.choice, req.decision
	}
	return cmd, nil
}

// answer sends a command's reply to the page: the record (made inert where
// it can carry engine text), a refusal with its code, or an unknown
// outcome, which the page shows as such and never retries by itself.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, reply *client.Reply, err error) {
	var ref *protocol.Refusal
	var out *client.OutcomeError
	switch {
	case errors.As(err, &ref):
		writeJSON(w, http.StatusOK, map[string]any{"refusal": map[string]any{"code": ref.Code,
			"message": terminal.SanitizeLine(ref.Message), "reconcile": ref.Reconcile}})
	case errors.As(err, &out):
		writeJSON(w, http.StatusOK, map[string]any{"unknown": terminal.SanitizeLine(err.Error())})
	case err != nil:
		writeJSON(w, http.StatusOK, map[string]any{"error": terminal.SanitizeLine(err.Error())})
	default:
		writeJSON(w, http.StatusOK, map[string]any{"reply": replyView(reply)})
	}
}

// replyView is a reply as the page shows it.
func replyView(r *client.Reply) any {
	switch {
	case r == nil:
		return nil
	case r.Receipt != nil:
		rc := *r.Receipt
		rc.Evidence = terminal.SanitizeLine(rc.Evidence)
		rc.Reason = terminal.SanitizeLine(rc.Reason)
		return rc
	case r.Confirmation != nil:
		c := *r.Confirmation
		c.Intent = terminal.SanitizeLine(c.Intent)
		return c
	case r.Control != nil:
		return r.Control
	case r.Eligibility != nil:
		return r.Eligibility
	case r.Approval != nil:
		return viewOf(r.Approval)
	case r.Queue != nil:
		return queueViewOf(r.Queue)
	}
	return map[string]string{"record": terminal.SanitizeLine(r.Record)}
}
