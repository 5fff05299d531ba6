package pi

import (
	"strconv"

	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/protocol"
)

// disposition says what the adapter does with a native event type.
type disposition int

const (
	// mapped: turned into one or more protocol events.
	mapped disposition = iota
	// tracked: read by the turn tracker only; it carries no content a
	// client renders (run and turn boundaries, queue and retry state).
	tracked
	// unsupported: known to the pinned protocol but not rendered by this
	// adapter; it becomes an unavailable event with a reason.
	unsupported
)

// nativeEvents is every event type pinned Pi 0.85.1 emits in RPC mode
// (docs/rpc.md 859-1374; dist/core/agent-session.d.ts AgentSessionEvent).
// A type missing here is unknown and becomes an unavailable event (E5).
var nativeEvents = map[string]disposition{
	"agent_start":                       tracked,
	"agent_end":                         tracked,
	"agent_settled":                     mapped, // run-settled
	"turn_start":                        tracked,
	"turn_end":                          tracked,
	"message_start":                     mapped,
	"message_update":                    mapped,
	"message_end":                       mapped,
	"tool_execution_start":              mapped,
	"tool_execution_update":             mapped,
	"tool_execution_end":                mapped,
	"queue_update":                      tracked,
	"compaction_start":                  tracked,
	"compaction_end":                    tracked,
	"auto_retry_start":                  tracked,
	"auto_retry_end":                    tracked,
	"entry_appended":                    tracked,
	"session_info_changed":              tracked,
	"thinking_level_changed":            tracked,
	"summarization_retry_scheduled":     tracked,
	"summarization_retry_attempt_start": tracked,
	"summarization_retry_finished":      tracked,
	"bash_execution_update":             unsupported, // the adapter never sends bash
	"extension_ui_request":              mapped,      // native-ui events carrying the request (dialogs.go)
	"extension_error":                   unsupported,
}

// maxNativeLabel bounds the native type echoed on an unavailable event.
const maxNativeLabel = 64

// mapper turns native events into protocol events for one execution,
// numbering them and keeping the message keys and block fragment counters
// a client needs to address content.
type mapper struct {
	exec  string
	seq   uint64
	msgs  int
	cur   *openMessage
	tools *engine.Recent[string] // tool call id -> message key
}

type openMessage struct {
	key   string
	role  string
	frags map[int]int // content index -> next fragment
}

func newMapper(exec string) *mapper {
	return &mapper{exec: exec, tools: engine.NewRecent[string](engine.MaxToolKeys)}
}

// event stamps a new event with the execution and the next sequence number.
func (m *mapper) event(kind protocol.EventKind) protocol.Event {
	m.seq++
	return protocol.Event{Record: protocol.RecordEvent, Kind: kind, Execution: m.exec, Seq: m.seq}
}

// unavailable makes an unavailable event that names the native type but
// carries none of its payload.
func (m *mapper) unavailable(reason, nativeType string) protocol.Event {
	e := m.event(protocol.EventUnavailable)
	e.Reason = reason
	e.Native = label(nativeType)
	return e
}

func label(s string) string {
	if len(s) > maxNativeLabel {
		s = s[:maxNativeLabel]
	}
	return s
}

// mapNative returns the protocol events for one native event, in order.
func (m *mapper) mapNative(n *native) []protocol.Event {
	d, known := nativeEvents[n.Type]
	switch {
	case !known:
		return []protocol.Event{m.unavailable(protocol.ReasonUnknownNative, n.Type)}
	case d == tracked:
		return nil
	case d == unsupported:
		return []protocol.Event{m.unavailable(protocol.ReasonUnsupportedNative, n.Type)}
	}
	switch n.Type {
	case "agent_settled":
		return []protocol.Event{m.event(protocol.EventRunSettled)}
	case "message_start":
		return m.messageStart(n)
	case "message_update":
		return m.messageUpdate(n)
	case "message_end":
		return m.messageEnd(n)
	case "tool_execution_start":
		e := m.toolEvent(protocol.EventToolStart, n)
		e.Tool.Args = n.Args
		e.Truncated = n.cut("/args")
		return []protocol.Event{e}
	case "tool_execution_update":
		// partialResult is the accumulated output so far: replace, never append.
		e := m.toolEvent(protocol.EventToolUpdate, n)
		e.UpdateMode = protocol.UpdateReplace
		e.Tool.Result = n.PartialResult
		e.Truncated = n.cut("/partialResult")
		return []protocol.Event{e}
	case "tool_execution_end":
		e := m.toolEvent(protocol.EventToolEnd, n)
		e.UpdateMode = protocol.UpdateReplace
		e.Tool.Result = n.Result
		e.Tool.IsError = n.IsError
		e.Truncated = n.cut("/result")
		return []protocol.Event{e}
	}
	return []protocol.Event{m.unavailable(protocol.ReasonUnknownNative, n.Type)}
}

func (m *mapper) open(role string) *openMessage {
	m.msgs++
	m.cur = &openMessage{key: "m" + strconv.Itoa(m.msgs), role: role, frags: make(map[int]int)}
	return m.cur
}

func (m *mapper) messageStart(n *native) []protocol.Event {
	msg, err := decodeMessage(n.Message)
	if err != nil {
		return []protocol.Event{m.unavailable(protocol.ReasonUndecodable, n.Type)}
	}
	o := m.open(msg.Role)
	e := m.event(protocol.EventMessageStart)
	e.Message, e.Role = o.key, o.role
	return []protocol.Event{e}
}

// messageUpdate maps one streamed delta. Pi 0.85.1 sends deltas only (no
// cumulative partial), so each becomes an append to its block's next
// fragment; the *_end subtypes close the block with an empty last fragment.
func (m *mapper) messageUpdate(n *native) []protocol.Event {
	u := n.Update
	if u == nil {
		return []protocol.Event{m.unavailable(protocol.ReasonUndecodable, n.Type)}
	}
	o := m.cur
	if o == nil {
		o = m.open("assistant")
	}
	var kind protocol.EventKind
	var blockType string
	last := false
	switch u.Type {
	case "text_start", "thinking_start":
		return nil
	case "text_delta", "text_end":
		kind, blockType, last = protocol.EventTextDelta, "text", u.Type == "text_end"
	case "thinking_delta", "thinking_end":
		kind, blockType, last = protocol.EventThinkingDelta, "thinking", u.Type == "thinking_end"
	case "toolcall_start", "toolcall_delta", "toolcall_end":
		kind, blockType, last = protocol.EventToolCallDelta, "toolCall", u.Type == "toolcall_end"
	default:
		return []protocol.Event{m.unavailable(protocol.ReasonUnknownNative, n.Type+"/"+u.Type)}
	}
	if !engine.BlockIndexOK(u.ContentIndex) {
		return []protocol.Event{m.unavailable(protocol.ReasonUnsupportedNative, n.Type+"/"+u.Type)}
	}
	e := m.event(kind)
	e.Message, e.Role = o.key, o.role
	e.Block, e.BlockType = protocol.Ordinal(u.ContentIndex), blockType
	e.Fragment = protocol.Ordinal(o.frags[u.ContentIndex])
	o.frags[u.ContentIndex]++
	e.LastFragment = last
	e.UpdateMode = protocol.UpdateAppend
	if !last {
		e.Text = u.Delta
		e.Truncated = n.cut("/assistantMessageEvent/delta")
	}
	switch u.Type {
	case "toolcall_start":
		e.Tool = &protocol.Tool{CallID: u.ID, Name: u.ToolName}
		m.tools.Put(u.ID, o.key)
	case "toolcall_end":
		if tc := u.ToolCall; tc != nil {
			e.Tool = &protocol.Tool{CallID: tc.ID, Name: tc.Name, Args: tc.Arguments}
			e.Truncated = n.cut("/assistantMessageEvent/toolCall")
			m.tools.Put(tc.ID, o.key)
		}
	}
	return []protocol.Event{e}
}

// messageEnd maps the authoritative copy of a message as one replacing
// part. Tool calls it holds are remembered so tool events can name it.
func (m *mapper) messageEnd(n *native) []protocol.Event {
	msg, err := decodeMessage(n.Message)
	if err != nil {
		m.cur = nil
		return []protocol.Event{m.unavailable(protocol.ReasonUndecodable, n.Type)}
	}
	o := m.cur
	if o == nil || o.role != msg.Role {
		o = m.open(msg.Role)
	}
	m.cur = nil
	e := m.event(protocol.EventMessageEnd)
	e.Message, e.Role = o.key, msg.Role
	e.UpdateMode = protocol.UpdateReplace
	e.Part, e.LastPart = protocol.Ordinal(0), true
	e.StopReason = msg.StopReason
	e.Content = make([]protocol.Block, 0, len(msg.Content))
	for i, b := range msg.Content {
		blk := b.Block()
		blk.Truncated = n.cut("/message/content/"+strconv.Itoa(i)) || (len(msg.Content) == 1 && n.cut("/message/content"))
		e.Content = append(e.Content, blk)
		if b.Type == "toolCall" {
			m.tools.Put(b.ID, o.key)
		}
	}
	e.Truncated = n.cut("/message")
	if msg.Role == "toolResult" {
		e.Tool = &protocol.Tool{CallID: msg.ToolCallID, Name: msg.ToolName, IsError: msg.IsError}
	}
	return []protocol.Event{e}
}

func (m *mapper) toolEvent(kind protocol.EventKind, n *native) protocol.Event {
	e := m.event(kind)
	e.Message, _ = m.tools.Get(n.ToolCallID)
	e.Role = "assistant"
	e.Tool = &protocol.Tool{CallID: n.ToolCallID, Name: n.ToolName}
	return e
}
