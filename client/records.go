package client

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mosaic-agents/mosaic/protocol"
)

// Server record names (the "record" field of every server line).
const (
	recWelcome      = "welcome"
	recRefusal      = "refusal"
	recEvent        = protocol.RecordEvent
	recBinding      = "binding"
	recControl      = "control"
	recStop         = "stop"
	recNotice       = "notice"
	recObserved     = "observed"
	recReceipt      = "receipt"
	recConfirmation = "confirmation"
	recEligibility  = "eligibility"
	recPage         = "page"
)

// Notice kinds the client and Transcript act on.
const (
	// NoticeLostPlace: the connection read too slowly and receives no more
	// events until it observes again; detail {"missedFrom": N}.
	NoticeLostPlace = "lost-place"
	// NoticeReconcile: the server asks clients to re-read history.
	NoticeReconcile = "reconcile"
	// NoticeForeignWriter: someone else appended to the session file.
	NoticeForeignWriter = "foreign-writer"
	// NoticeDialog: a native dialog, shown disabled with a reason.
	NoticeDialog = "dialog"
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
	// Raw is the line as received, without its LF.
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
	Refusal      *protocol.RefusalRecord
	Welcome      *protocol.Welcome

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
	case u.Refusal != nil:
		return u.Refusal.Request
	}
	return ""
}

// decodeRecord validates a server line strictly (UTF-8, no duplicate keys,
// no unpaired surrogates, safe integers) and decodes it by its "record".
// Unknown fields are tolerated: the server is strict about what clients
// send, and a client stays usable when a server adds a field.
func decodeRecord(line []byte) (Update, error) {
	u := Update{Raw: append([]byte(nil), line...)}
	if err := protocol.Validate(line); err != nil {
		return u, fmt.Errorf("%w: %v", ErrProtocol, err)
	}
	var head struct {
		Record string `json:"record"`
	}
	if err := json.Unmarshal(line, &head); err != nil || head.Record == "" {
		return u, fmt.Errorf("%w: a server line without a string \"record\"", ErrProtocol)
	}
	u.Record = head.Record
	var v any
	switch u.Record {
	case recWelcome:
		u.Welcome = new(protocol.Welcome)
		v = u.Welcome
	case recRefusal:
		u.Refusal = new(protocol.RefusalRecord)
		v = u.Refusal
	case recEvent:
		u.Event = new(protocol.Event)
		v = u.Event
	case recBinding:
		u.Binding = new(protocol.Binding)
		v = u.Binding
	case recControl:
		u.Control = new(protocol.ControlRecord)
		v = u.Control
	case recStop:
		u.Stop = new(protocol.Stop)
		v = u.Stop
	case recNotice:
		u.Notice = new(protocol.Notice)
		v = u.Notice
	case recObserved:
		u.Observed = new(protocol.Observed)
		v = u.Observed
	case recReceipt:
		u.Receipt = new(protocol.Receipt)
		v = u.Receipt
	case recConfirmation:
		u.Confirmation = new(protocol.Confirmation)
		v = u.Confirmation
	case recEligibility:
		u.Eligibility = new(protocol.Eligibility)
		v = u.Eligibility
	case recPage:
		u.Page = new(protocol.PageRecord)
		v = u.Page
	default:
		return u, nil
	}
	if err := json.Unmarshal(line, v); err != nil {
		return u, fmt.Errorf("%w: a %s record that does not fit its shape: %v", ErrProtocol, u.Record, err)
	}
	return u, nil
}

// refusalOf turns a wire refusal into the error callers match on.
func refusalOf(r *protocol.RefusalRecord) *protocol.Refusal {
	return &protocol.Refusal{Code: r.Code, Message: r.Message, Reconcile: r.Reconcile}
}

// lostPlace is the notice the client synthesises when its own update queue
// overflows: the same shape as the server's, marked local in its detail.
func lostPlace(missedFrom uint64) Update {
	detail, _ := json.Marshal(map[string]any{"missedFrom": missedFrom, "local": true})
	n := &protocol.Notice{Record: recNotice, Kind: NoticeLostPlace, Detail: detail,
		Message: "this client's update queue overflowed; events are dropped until the next observe"}
	raw, _ := json.Marshal(n)
	return Update{Record: recNotice, Notice: n, Raw: raw}
}
