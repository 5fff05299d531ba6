package terminal

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/mosaic-agents/mosaic/protocol"
)

// HistoryMessage is one finished message of a history page: what AddPage
// makes of a page entry, its parts and fragments joined.
type HistoryMessage struct {
	Role       string
	Content    []protocol.Block
	StopReason string
	// Tool is set on a toolResult message: its call id (which hides the
	// call's progress item), tool name and error flag.
	Tool *protocol.Tool
}

// Transcript is the view model of one conversation as a client.View
// shows it: history messages, then the view's events folded into messages
// and tool progress, with reconcile markers where the view says the page
// and the stream may not join. The client library's Transcript is the one
// that orders, deduplicates and marks seams; this one renders what it
// holds, so the terminal and any other renderer of the library show the
// same lines (E7). It has no I/O.
//
// The zero value is ready to use. A Transcript is not safe for concurrent
// use.
type Transcript struct {
	items   []*item
	seg     int                 // bumped at every reconcile marker
	msgs    map[string]*message // by seg/message key
	tools   map[string]*tool    // by seg/call id
	results map[string]bool     // call ids whose result message is present
	marked  bool
	// head counts the items above the first entry that starts on the
	// newest history page (Compose): the marker and the older history.
	head int
}

type itemKind int

const (
	itemMessage itemKind = iota
	itemTool
	itemNotice
	itemMarker
)

type item struct {
	kind itemKind
	msg  *message
	tool *tool
	text string
	// The lines last rendered, for width cw at version cv of the message
	// or tool: a frame re-renders only what changed since the last one.
	cache  []string
	cw, cv int
	// How many lines it has at width nw and version nv, when counted:
	// the frame's length needs every item's, its viewport the lines of
	// a few.
	n, nw, nv int
	counted   bool
}

type message struct {
	role       string
	blocks     map[int]*block // provisional content, by block ordinal
	parts      map[int][]protocol.Block
	lastPart   int  // -1 until the last part is seen
	final      bool // a message-end arrived: parts replace blocks
	continued  bool // created by a delta: its start was not seen
	stopReason string
	tool       *protocol.Tool
	ver        int // bumped by every change, for the line cache
}

type block struct {
	typ    string
	text   strings.Builder
	next   int  // next expected fragment
	elided bool // the first fragment seen was not 0
	name   string
	args   json.RawMessage
}

type tool struct {
	callID, name string
	args         json.RawMessage
	result       json.RawMessage
	done         bool
	isError      bool
	ver          int // bumped by every change, for the line cache
}

func (t *Transcript) init() {
	if t.msgs == nil {
		t.msgs = make(map[string]*message)
		t.tools = make(map[string]*tool)
		t.results = make(map[string]bool)
	}
}

// Reset empties the transcript, before a page is re-read.
func (t *Transcript) Reset() { *t = Transcript{} }

// Marked reports whether a reconcile marker was shown since the last
// Reset.
func (t *Transcript) Marked() bool { return t.marked }

// Mark shows a reconcile marker (a seam that is not quiet, a re-read in
// progress): content after it is never joined to content before it.
func (t *Transcript) Mark(reason string) {
	t.init()
	t.reconcile(reason)
}

func (t *Transcript) reconcile(reason string) {
	t.items = append(t.items, &item{kind: itemMarker, text: reason})
	t.seg++
	t.marked = true
}

func (t *Transcript) notice(text string) {
	t.items = append(t.items, &item{kind: itemNotice, text: text})
}

// AddHistory appends a finished message from a history page.
func (t *Transcript) AddHistory(h HistoryMessage) {
	t.init()
	m := &message{role: h.Role, parts: map[int][]protocol.Block{0: h.Content}, lastPart: 0, final: true, stopReason: h.StopReason, tool: h.Tool}
	if h.Tool != nil && h.Role == "toolResult" {
		t.results[h.Tool.CallID] = true
	}
	t.items = append(t.items, &item{kind: itemMessage, msg: m})
}

func (t *Transcript) key(s string) string { return strconv.Itoa(t.seg) + "/" + s }

func (t *Transcript) newMessage(key, role string, continued bool) *message {
	m := &message{role: role, blocks: make(map[int]*block), parts: make(map[int][]protocol.Block), lastPart: -1, continued: continued}
	t.msgs[t.key(key)] = m
	t.items = append(t.items, &item{kind: itemMessage, msg: m})
	return m
}

// message returns the addressed message of the current segment, creating
// it (its start unseen) when a seam put it out of reach.
func (t *Transcript) message(e protocol.Event) *message {
	if m := t.msgs[t.key(e.Message)]; m != nil {
		return m
	}
	return t.newMessage(e.Message, e.Role, true)
}

func (t *Transcript) tool(e protocol.Event) *tool {
	k := t.key(e.Tool.CallID)
	if x := t.tools[k]; x != nil {
		return x
	}
	x := &tool{callID: e.Tool.CallID, name: e.Tool.Name}
	t.tools[k] = x
	t.items = append(t.items, &item{kind: itemTool, tool: x})
	return x
}

// Apply folds the next event of a client.View into the transcript. The
// events come ordered, deduplicated and of one execution (the client
// library's Transcript sees to that, and marks where they may not join the
// page); Apply checks only what the stream says about its own messages: a
// fragment out of order, a delta after the end of its message and a second
// start of one message each show a reconcile marker, and what follows the
// marker is never joined to what came before it.
func (t *Transcript) Apply(e protocol.Event) {
	t.init()
	switch e.Kind {
	case protocol.EventMessageStart:
		if t.msgs[t.key(e.Message)] != nil {
			t.reconcile(fmt.Sprintf("message %s started twice", e.Message))
		}
		t.newMessage(e.Message, e.Role, false)
	case protocol.EventTextDelta, protocol.EventThinkingDelta, protocol.EventToolCallDelta:
		t.delta(e)
	case protocol.EventMessageEnd:
		m := t.msgs[t.key(e.Message)]
		if m == nil {
			m = t.newMessage(e.Message, e.Role, false)
		}
		if e.Role != "" {
			m.role = e.Role
		}
		p := 0
		if e.Part != nil {
			p = *e.Part
		}
		m.parts[p] = e.Content
		if e.LastPart || e.Part == nil {
			m.lastPart = p
		}
		m.final = true
		m.stopReason = e.StopReason
		m.ver++
		if e.Tool != nil && m.role == "toolResult" {
			m.tool = e.Tool
			t.results[e.Tool.CallID] = true
		}
	case protocol.EventToolStart, protocol.EventToolUpdate, protocol.EventToolEnd:
		if e.Tool == nil {
			t.notice("unavailable: " + string(e.Kind) + " without a tool call")
			return
		}
		x := t.tool(e)
		x.ver++
		if e.Tool.Name != "" {
			x.name = e.Tool.Name
		}
		switch e.Kind {
		case protocol.EventToolStart:
			x.args = e.Tool.Args
		case protocol.EventToolUpdate:
			x.result = e.Tool.Result
		case protocol.EventToolEnd:
			x.result, x.done, x.isError = e.Tool.Result, true, e.Tool.IsError
		}
	case protocol.EventRunSettled:
		t.notice("run settled")
	case protocol.EventNativeUI:
		// What it asked is an approval or a notice; here only where.
		t.notice("extension ui: " + e.Native)
	case protocol.EventUnavailable:
		s := "unavailable: " + e.Reason
		if e.Native != "" {
			s += " (" + e.Native + ")"
		}
		if e.Dropped > 0 {
			s += fmt.Sprintf(" (%d engine events dropped)", e.Dropped)
		}
		t.notice(s)
	default:
		// A kind this client does not know: show a gap, never guess.
		t.notice("unavailable: unknown event kind " + string(e.Kind))
	}
}

// blockTypes is the block type each delta kind addresses (the kind, not
// the optional BlockType field, decides how a block is shown).
var blockTypes = map[protocol.EventKind]string{
	protocol.EventTextDelta:     "text",
	protocol.EventThinkingDelta: "thinking",
	protocol.EventToolCallDelta: "toolCall",
}

// delta appends a text, thinking or tool-call argument fragment to its
// block. A fragment out of order, or a delta for a message already ended,
// marks a reconcile and goes to a fresh copy of the message after it.
func (t *Transcript) delta(e protocol.Event) {
	b := 0
	if e.Block != nil {
		b = *e.Block
	}
	m := t.message(e)
	blk := m.blocks[b]
	frag := -1
	if e.Fragment != nil {
		frag = *e.Fragment
	}
	switch {
	case m.final:
		t.reconcile(fmt.Sprintf("delta after the end of message %s", e.Message))
		m, blk = t.message(e), nil
	case blk != nil && frag >= 0 && frag != blk.next:
		t.reconcile(fmt.Sprintf("fragment gap in message %s block %d: expected %d, got %d", e.Message, b, blk.next, frag))
		m, blk = t.message(e), nil
	}
	if blk == nil {
		blk = &block{typ: blockTypes[e.Kind], next: max(frag, 0), elided: frag > 0}
		m.blocks[b] = blk
	}
	m.ver++
	blk.text.WriteString(e.Text)
	if frag >= 0 {
		blk.next = frag + 1
	} else {
		blk.next++
	}
	if e.Tool != nil {
		if e.Tool.Name != "" {
			blk.name = e.Tool.Name
		}
		if e.LastFragment && len(e.Tool.Args) > 0 {
			blk.args = e.Tool.Args
		}
	}
}
