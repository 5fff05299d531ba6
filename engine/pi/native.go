package pi

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mosaic-agents/mosaic/engine"
)

// native is one decoded line of Pi's RPC output: a response or an event.
// Only the fields the adapter reads are decoded; payloads the adapter
// passes on (tool arguments and results, message content) stay raw JSON.
type native struct {
	Type string `json:"type"`
	ID   string `json:"id,omitempty"`

	// Responses.
	Command string          `json:"command,omitempty"`
	Success *bool           `json:"success,omitempty"`
	Error   string          `json:"error,omitempty"`
	Data    json.RawMessage `json:"data,omitempty"`

	// message_start, message_end, turn_end.
	Message json.RawMessage `json:"message,omitempty"`
	// message_update.
	Update *assistantEvent `json:"assistantMessageEvent,omitempty"`

	// tool_execution_*.
	ToolCallID    string          `json:"toolCallId,omitempty"`
	ToolName      string          `json:"toolName,omitempty"`
	Args          json.RawMessage `json:"args,omitempty"`
	PartialResult json.RawMessage `json:"partialResult,omitempty"`
	Result        json.RawMessage `json:"result,omitempty"`
	IsError       bool            `json:"isError,omitempty"`

	// agent_end, compaction_end.
	WillRetry bool `json:"willRetry,omitempty"`

	// entry_appended.
	Entry json.RawMessage `json:"entry,omitempty"`

	// queue_update.
	Steering []string `json:"steering,omitempty"`
	FollowUp []string `json:"followUp,omitempty"`

	// clip says what framing cut from an oversize line (nil: whole).
	clip *engine.Clip
}

// cut reports whether the line lost anything at or below the JSON
// pointer prefix.
func (n *native) cut(prefix string) bool {
	return n.clip != nil && (n.clip.Strings > 0 || n.clip.Dropped > 0) && n.clip.Under(prefix)
}

// assistantEvent is message_update.assistantMessageEvent.
type assistantEvent struct {
	Type         string              `json:"type"`
	ContentIndex int                 `json:"contentIndex"`
	Delta        string              `json:"delta,omitempty"`
	ID           string              `json:"id,omitempty"`
	ToolName     string              `json:"toolName,omitempty"`
	ToolCall     *engine.NativeBlock `json:"toolCall,omitempty"`
	Content      json.RawMessage     `json:"content,omitempty"`
}

// nativeMessage is an AgentMessage as Pi puts it in message_start/_end.
type nativeMessage struct {
	Role       string        `json:"role"`
	Content    nativeContent `json:"content"`
	StopReason string        `json:"stopReason,omitempty"`
	ToolCallID string        `json:"toolCallId,omitempty"`
	ToolName   string        `json:"toolName,omitempty"`
	IsError    bool          `json:"isError,omitempty"`
}

// nativeContent accepts both shapes Pi uses for message content: a plain
// string (user messages built by some paths) or an array of blocks.
type nativeContent []engine.NativeBlock

func (c *nativeContent) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*c = nativeContent{{Type: "text", Text: s}}
		return nil
	}
	var blocks []engine.NativeBlock
	if err := json.Unmarshal(b, &blocks); err != nil {
		return err
	}
	*c = blocks
	return nil
}

// queueData is clear_queue's response data.
type queueData struct {
	Steering []string `json:"steering"`
	FollowUp []string `json:"followUp"`
}

var errNoType = errors.New("record has no type")

// decodeLine decodes one framed line. It fails for anything that is not a
// JSON object with a non-empty string type; the caller turns that into an
// unavailable event, never a silent drop.
func decodeLine(line []byte) (*native, error) {
	var n native
	if err := json.Unmarshal(line, &n); err != nil {
		return nil, fmt.Errorf("decode engine line: %w", err)
	}
	if n.Type == "" {
		return nil, fmt.Errorf("decode engine line: %w", errNoType)
	}
	return &n, nil
}

// decodeMessage decodes the message of message_start/_end.
func decodeMessage(raw json.RawMessage) (*nativeMessage, error) {
	if len(raw) == 0 {
		return nil, errors.New("event has no message")
	}
	var m nativeMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("decode message: %w", err)
	}
	return &m, nil
}

// text joins a message's text blocks, which is what Pi stores as a
// prompt's user message (agent-session.js: content [{type:"text",text}]).
func (m *nativeMessage) text() string {
	var s string
	for _, b := range m.Content {
		if b.Type == "text" {
			s += b.Text
		}
	}
	return s
}
