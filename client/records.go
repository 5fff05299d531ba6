package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mosaic-agents/mosaic/protocol"
)

// ErrProtocol classifies a server line this client cannot accept: not
// strict JSON, no "record", or a known record of the wrong shape. The
// connection ends, since nothing after it can be trusted to line up.
var ErrProtocol = errors.New("conversation protocol violation")

// Update is one server record, decoded. Record names its kind and exactly
// the matching field is set; a record kind this client does not know keeps
// only Record and Raw, so a newer server's additions pass through.
type Update struct {
	Record string
	// Raw is the line as received, without its LF. It shares the block
	// the connection was read into with its neighbours on the stream (at
	// most 64 KiB, or a longer line's own: protocol.LineReader), so
	// keeping Raw keeps that block.
	Raw []byte

	Event        *protocol.Event
	Binding      *protocol.Binding
	Control      *protocol.ControlRecord
	Stop         *protocol.Stop
	Notice       *protocol.Notice
	Observed     *protocol.Observed
	Receipt      *protocol.Receipt
	Confirmation *protocol.Confirmation
	Eligibility  *protocol.Eligibility
	Page         *protocol.PageRecord
	Queue        *protocol.Queue
	Refusal      *protocol.RefusalRecord
	Welcome      *protocol.Welcome
	// Approval is set for approval and approval-resolved records.
	Approval *protocol.Approval

	// Reply is set when the record answered a request of this client.
	Reply bool
	// Retry is set on the reply to a Resend: the server's stored copy of
	// an earlier reply (a takeover's control record names the connection
	// that sent the original), so it is history, not news, and does not
	// change State.
	Retry bool
	// FromSeq is the fromSeq of the observe an Observed answered, nil for
	// a fresh observe: a Transcript needs it to join replay to what it holds.
	FromSeq *uint64
}

// request returns the request id the record answers, "" for broadcasts.
func (u *Update) request() string {
	switch {
	case u.Observed != nil:
		return u.Observed.Request
	case u.Control != nil:
		return u.Control.Request
	case u.Receipt != nil:
		return u.Receipt.Request
	case u.Confirmation != nil:
		return u.Confirmation.Request
	case u.Eligibility != nil:
		return u.Eligibility.Request
	case u.Page != nil:
		return u.Page.Request
	case u.Queue != nil:
		return u.Queue.Request
	case u.Refusal != nil:
		return u.Refusal.Request
	case u.Approval != nil:
		return u.Approval.Request
	}
	return ""
}

// decodeRecord validates a server line strictly (UTF-8, no duplicate keys,
// no unpaired surrogates, safe integers) and decodes it by its "record".
// Unknown fields are tolerated: the server is strict about what clients
// send, and a client stays usable when a server adds a field.
func decodeRecord(line []byte) (Update, error) {
	var d lineDecoder
	return d.decode(bytes.Clone(line))
}

// decode is decodeRecord for one connection's stream: an event, binding
// or queue line of the flat shape the controller writes is validated and
// decoded in one pass (lineDecoder.event, lineDecoder.flat), every other
// line the full way. The line
// becomes the Update's Raw: nobody may write to it after (protocol.LineReader's
// lines are never written again).
func (d *lineDecoder) decode(line []byte) (Update, error) {
	if ev, ok := d.event(line); ok {
		return Update{Record: protocol.RecordEvent, Raw: line, Event: ev}, nil
	}
	return d.record(line)
}

// record is decode for a line the one-pass event decoder did not take.
func (d *lineDecoder) record(line []byte) (Update, error) {
	if u, ok := d.flat(line); ok {
		return u, nil
	}
	return decodeFull(line)
}

// decodeFull is decode for a line the one-pass decoder did not take.
func decodeFull(line []byte) (Update, error) {
	u := Update{Raw: line}
	if err := protocol.Validate(line); err != nil {
		return u, fmt.Errorf("%w: %v", ErrProtocol, err)
	}
	record, ok := recordOf(line)
	if !ok {
		return u, fmt.Errorf("%w: a server line without a string \"record\"", ErrProtocol)
	}
	u.Record = record
	var v any
	switch u.Record {
	case protocol.RecordWelcome:
		u.Welcome = new(protocol.Welcome)
		v = u.Welcome
	case protocol.RecordRefusal:
		u.Refusal = new(protocol.RefusalRecord)
		v = u.Refusal
	case protocol.RecordEvent:
		u.Event = new(protocol.Event)
		v = u.Event
	case protocol.RecordBinding:
		u.Binding = new(protocol.Binding)
		v = u.Binding
	case protocol.RecordControl:
		u.Control = new(protocol.ControlRecord)
		v = u.Control
	case protocol.RecordStop:
		u.Stop = new(protocol.Stop)
		v = u.Stop
	case protocol.RecordNotice:
		u.Notice = new(protocol.Notice)
		v = u.Notice
	case protocol.RecordObserved:
		u.Observed = new(protocol.Observed)
		v = u.Observed
	case protocol.RecordReceipt:
		u.Receipt = new(protocol.Receipt)
		v = u.Receipt
	case protocol.RecordConfirmation:
		u.Confirmation = new(protocol.Confirmation)
		v = u.Confirmation
	case protocol.RecordEligibility:
		u.Eligibility = new(protocol.Eligibility)
		v = u.Eligibility
	case protocol.RecordPage:
		u.Page = new(protocol.PageRecord)
		v = u.Page
	case protocol.RecordApproval, protocol.RecordApprovalResolved:
		u.Approval = new(protocol.Approval)
		v = u.Approval
	case protocol.RecordQueue:
		u.Queue = new(protocol.Queue)
		v = u.Queue
	default:
		return u, nil
	}
	if err := json.Unmarshal(line, v); err != nil {
		return u, fmt.Errorf("%w: a %s record that does not fit its shape: %v", ErrProtocol, u.Record, err)
	}
	return u, nil
}

// recordOf returns the "record" of a validated line. The server writes it
// first, as a plain string, and Validate refused a second "record" key, so
// the prefix names it without a decode per line; any other line is
// decoded.
func recordOf(line []byte) (string, bool) {
	if rest, ok := bytes.CutPrefix(line, []byte(`{"record":"`)); ok {
		if i := bytes.IndexByte(rest, '"'); i > 0 && bytes.IndexByte(rest[:i], '\\') < 0 {
			return string(rest[:i]), true
		}
	}
	var head struct {
		Record string `json:"record"`
	}
	if err := json.Unmarshal(line, &head); err != nil || head.Record == "" {
		return "", false
	}
	return head.Record, true
}

// refusalOf turns a wire refusal into the error callers match on.
func refusalOf(r *protocol.RefusalRecord) *protocol.Refusal {
	return &protocol.Refusal{Code: r.Code, Message: r.Message, Reconcile: r.Reconcile}
}

// lostPlace is the notice the client synthesises when its own update queue
// overflows: the same shape as the server's, marked local in its detail.
func lostPlace(missedFrom uint64) Update {
	detail, _ := json.Marshal(map[string]any{"missedFrom": missedFrom, "local": true})
	n := &protocol.Notice{Record: protocol.RecordNotice, Kind: protocol.NoticeLostPlace, Detail: detail,
		Message: "this client's update queue overflowed; events are dropped until the next observe"}
	raw, _ := json.Marshal(n)
	return Update{Record: protocol.RecordNotice, Notice: n, Raw: raw}
}
