package claude

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/mosaic-agents/mosaic/engine"
	hclaude "github.com/mosaic-agents/mosaic/history/claude"
	"github.com/mosaic-agents/mosaic/protocol"
)

// tracked frames feed the tracker and carry nothing a client renders.
var trackedSystem = map[string]bool{"init": true, "status": true, "session_state_changed": true}

// maxNativeLabel bounds the native type echoed on an unavailable event.
const maxNativeLabel = 64

func label(s string) string {
	if len(s) > maxNativeLabel {
		s = s[:maxNativeLabel]
	}
	return s
}

// mapper turns frames into protocol events for one execution: the same
// kinds Pi's adapter produces, numbered, with message keys m1, m2, ...
type mapper struct {
	exec  string
	seq   uint64
	msgs  int
	open  *engine.Recent[*openMessage] // API message id -> streaming message
	tools *engine.Recent[string]       // tool_use id -> message key
}

type openMessage struct {
	key     string
	types   map[int]string // block index -> text, thinking, toolCall
	frags   map[int]int
	content []Block
	stop    string
	cut     bool
}

// maxOpenMessages bounds the messages streaming at once: the CLI streams
// one at a time, and a message forgotten past it ends as orphan deltas.
const maxOpenMessages = 64

func newMapper(exec string) *mapper {
	return &mapper{exec: exec, open: engine.NewRecent[*openMessage](maxOpenMessages), tools: engine.NewRecent[string](engine.MaxToolKeys)}
}

func (m *mapper) event(kind protocol.EventKind) protocol.Event {
	m.seq++
	return protocol.Event{Record: protocol.RecordEvent, Kind: kind, Execution: m.exec, Seq: m.seq}
}

func (m *mapper) unavailable(reason, native string) protocol.Event {
	e := m.event(protocol.EventUnavailable)
	e.Reason, e.Native = reason, label(native)
	return e
}

func (m *mapper) newKey() string {
	m.msgs++
	return "m" + strconv.Itoa(m.msgs)
}

// mapFrame returns the events for one frame, in order. cut says framing
// reduced the line (strings cut): content events are marked truncated.
func (m *mapper) mapFrame(f *frame, cut bool) []protocol.Event {
	if f.ParentToolUseID != nil && *f.ParentToolUseID != "" {
		// A subagent's own stream: kept apart from the main branch (L5),
		// not rendered live.
		return []protocol.Event{m.unavailable(protocol.ReasonUnsupportedNative, f.Type+"/subagent")}
	}
	switch f.Type {
	case "command_lifecycle":
		return nil
	case "system":
		if trackedSystem[f.Subtype] {
			return nil
		}
		return []protocol.Event{m.unavailable(protocol.ReasonUnsupportedNative, "system/"+f.Subtype)}
	case "stream_event":
		if f.Event == nil {
			return []protocol.Event{m.unavailable(protocol.ReasonUndecodable, f.Type)}
		}
		return m.stream(f, cut)
	case "assistant":
		return m.assistant(f, cut)
	case "user":
		return m.user(f, cut)
	case "result":
		return []protocol.Event{m.event(protocol.EventRunSettled)}
	}
	return []protocol.Event{m.unavailable(protocol.ReasonUnknownNative, f.Type)}
}

func (m *mapper) stream(f *frame, cut bool) []protocol.Event {
	ev := f.Event
	o, _ := m.open.Get(f.APIMessageID)
	switch ev.Type {
	case "message_start":
		o = &openMessage{key: m.newKey(), types: map[int]string{}, frags: map[int]int{}}
		m.open.Put(f.APIMessageID, o)
		e := m.event(protocol.EventMessageStart)
		e.Message, e.Role = o.key, "assistant"
		return []protocol.Event{e}
	case "ping":
		return nil
	}
	if o == nil {
		return []protocol.Event{m.unavailable(protocol.ReasonUnknownNative, "stream_event/"+ev.Type+"/orphan")}
	}
	if strings.HasPrefix(ev.Type, "content_block_") && !engine.BlockIndexOK(ev.Index) {
		return []protocol.Event{m.unavailable(protocol.ReasonUnsupportedNative, "stream_event/"+ev.Type)}
	}
	switch ev.Type {
	case "content_block_start":
		if ev.ContentBlock == nil {
			return nil
		}
		switch ev.ContentBlock.Type {
		case "text":
			o.types[ev.Index] = "text"
		case "thinking":
			o.types[ev.Index] = "thinking"
		case "tool_use":
			o.types[ev.Index] = "toolCall"
			m.tools.Put(ev.ContentBlock.ID, o.key)
			e := m.delta(o, ev.Index, protocol.EventToolCallDelta, "", false)
			e.Tool = &protocol.Tool{CallID: ev.ContentBlock.ID, Name: ev.ContentBlock.Name}
			return []protocol.Event{e}
		default:
			return []protocol.Event{m.unavailable(protocol.ReasonUnknownBlock, "content_block/"+ev.ContentBlock.Type)}
		}
		return nil
	case "content_block_delta":
		if ev.Delta == nil {
			return nil
		}
		var e protocol.Event
		switch ev.Delta.Type {
		case "text_delta":
			e = m.delta(o, ev.Index, protocol.EventTextDelta, ev.Delta.Text, false)
		case "thinking_delta":
			e = m.delta(o, ev.Index, protocol.EventThinkingDelta, ev.Delta.Thinking, false)
		case "input_json_delta":
			e = m.delta(o, ev.Index, protocol.EventToolCallDelta, ev.Delta.PartialJSON, false)
		case "signature_delta", "citations_delta":
			return nil
		default:
			return []protocol.Event{m.unavailable(protocol.ReasonUnknownNative, "content_block_delta/"+ev.Delta.Type)}
		}
		e.Truncated = cut
		return []protocol.Event{e}
	case "content_block_stop":
		kind, ok := map[string]protocol.EventKind{"text": protocol.EventTextDelta, "thinking": protocol.EventThinkingDelta, "toolCall": protocol.EventToolCallDelta}[o.types[ev.Index]]
		if !ok {
			return nil
		}
		return []protocol.Event{m.delta(o, ev.Index, kind, "", true)}
	case "message_delta":
		if ev.Delta != nil && ev.Delta.StopReason != "" {
			o.stop = ev.Delta.StopReason
		}
		return nil
	case "message_stop":
		m.open.Delete(f.APIMessageID)
		return []protocol.Event{m.end(o, "assistant")}
	}
	return []protocol.Event{m.unavailable(protocol.ReasonUnknownNative, "stream_event/"+ev.Type)}
}

func (m *mapper) delta(o *openMessage, idx int, kind protocol.EventKind, text string, last bool) protocol.Event {
	e := m.event(kind)
	e.Message, e.Role = o.key, "assistant"
	e.Block, e.BlockType = protocol.Ordinal(idx), o.types[idx]
	e.Fragment = protocol.Ordinal(o.frags[idx])
	o.frags[idx]++
	e.LastFragment, e.UpdateMode, e.Text = last, protocol.UpdateAppend, text
	return e
}

func (m *mapper) end(o *openMessage, role string) protocol.Event {
	e := m.event(protocol.EventMessageEnd)
	e.Message, e.Role = o.key, role
	e.UpdateMode = protocol.UpdateReplace
	e.Part, e.LastPart = protocol.Ordinal(0), true
	e.StopReason = o.stop
	e.Content = append([]Block{}, o.content...)
	e.Truncated = o.cut
	return e
}

// assistant adds one content block to its streaming message (the CLI
// emits one assistant frame per block, sharing message.id, DIGEST §4);
// the message ends at message_stop. A tool_use block starts the tool's
// effects: the CLI may run it from here (auto-allowed or once allowed).
// An assistant frame with no stream (a synthetic API error message) is a
// whole message by itself.
func (m *mapper) assistant(f *frame, cut bool) []protocol.Event {
	var msg apiMessage
	if err := json.Unmarshal(f.Message, &msg); err != nil {
		return []protocol.Event{m.unavailable(protocol.ReasonUndecodable, f.Type)}
	}
	var out []protocol.Event
	o, streaming := m.open.Get(msg.ID)
	if !streaming {
		o = &openMessage{key: m.newKey(), types: map[int]string{}, frags: map[int]int{}}
		e := m.event(protocol.EventMessageStart)
		e.Message, e.Role = o.key, "assistant"
		out = append(out, e)
	}
	o.cut = o.cut || cut
	for _, b := range hclaude.Blocks(msg.Content) {
		blk := b.Block()
		blk.Truncated = cut
		o.content = append(o.content, blk)
		if b.Type == "tool_use" {
			m.tools.Put(b.ID, o.key)
			e := m.event(protocol.EventToolStart)
			e.Message, e.Role = o.key, "assistant"
			e.Tool = &protocol.Tool{CallID: b.ID, Name: b.Name, Args: b.Input}
			e.Truncated = cut
			out = append(out, e)
		}
	}
	if !streaming {
		if msg.StopReason != nil {
			o.stop = *msg.StopReason
		}
		if f.IsAPIErrorMessage || len(f.APIError) > 0 && string(f.APIError) != "null" {
			// Its stop_reason says stop_sequence: the turn failed all
			// the same, as Pi's message with stopReason error does.
			o.stop = stopError
		}
		out = append(out, m.end(o, "assistant"))
	}
	return out
}

// stopError is the stop reason of a message that ends a turn on an
// error: Pi's own word, which clients read as a failed turn (`mosaicctl
// prompt` exits 4 with it).
const stopError = "error"

// user maps a user frame: each tool_result becomes a tool-end and a
// toolResult message; text (the CLI's interruption markers) a user
// message.
func (m *mapper) user(f *frame, cut bool) []protocol.Event {
	var msg apiMessage
	if err := json.Unmarshal(f.Message, &msg); err != nil {
		return []protocol.Event{m.unavailable(protocol.ReasonUndecodable, f.Type)}
	}
	var out []protocol.Event
	var text []Block
	for _, b := range hclaude.Blocks(msg.Content) {
		if b.Type != "tool_result" {
			blk := b.Block()
			blk.Truncated = cut
			text = append(text, blk)
			continue
		}
		tool := &protocol.Tool{CallID: b.ToolUseID, IsError: b.IsError}
		end := m.event(protocol.EventToolEnd)
		end.Message, _ = m.tools.Get(b.ToolUseID)
		end.Role, end.UpdateMode = "assistant", protocol.UpdateReplace
		end.Tool = &protocol.Tool{CallID: b.ToolUseID, Result: b.Content, IsError: b.IsError}
		end.Truncated = cut
		o := &openMessage{key: m.newKey(), content: []Block{b.Block()}, cut: cut}
		start := m.event(protocol.EventMessageStart)
		start.Message, start.Role = o.key, "toolResult"
		me := m.end(o, "toolResult")
		me.Tool = tool
		out = append(out, end, start, me)
	}
	if len(text) > 0 {
		o := &openMessage{key: m.newKey(), content: text, cut: cut}
		start := m.event(protocol.EventMessageStart)
		start.Message, start.Role = o.key, "user"
		out = append(out, start, m.end(o, "user"))
	}
	return out
}
