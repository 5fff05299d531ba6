package claude

import (
	"encoding/json"
	"strings"

	"github.com/mosaic-agents/mosaic/history"
	"github.com/mosaic-agents/mosaic/protocol"
)

// APIBlock is one Messages API content block, in the shape the CLI both
// streams (assistant and user frames) and writes to the transcript. Only
// the fields mosaic reads are decoded.
type APIBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	Thinking  string          `json:"thinking,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
}

// Blocks reads message content that is either a string (one text block)
// or a block list; anything else is no block. A list is not first tried
// as a string: that try would validate the whole of it only to fail.
func Blocks(raw json.RawMessage) []APIBlock {
	var s string
	if first(raw) != '[' && json.Unmarshal(raw, &s) == nil {
		return []APIBlock{{Type: "text", Text: s}}
	}
	if history.ArrayLen(raw, history.MaxBlocks) > history.MaxBlocks {
		// Never decoded, as a Pi message of as many is not: a block
		// decodes to far more than the 3 bytes of `{}`, and a line a tool
		// appends to the transcript would hold the controller's memory.
		return []APIBlock{{Type: "unavailable"}}
	}
	var bs []APIBlock
	_ = json.Unmarshal(raw, &bs)
	return bs
}

// first is raw's first byte that is not JSON whitespace, 0 if none.
func first(raw []byte) byte {
	for _, c := range raw {
		switch c {
		case ' ', '\t', '\n', '\r':
		default:
			return c
		}
	}
	return 0
}

// ResultText is a tool result's text: its string, or its text blocks
// joined.
func ResultText(raw json.RawMessage) string {
	var out strings.Builder
	for _, b := range Blocks(raw) {
		if b.Type == "text" {
			out.WriteString(b.Text)
		}
	}
	return out.String()
}

// Block converts b to a protocol block, the same live and from the
// transcript. An unknown type (redacted reasoning, images, server tools)
// keeps its place, so ordinals stay right, but none of its content.
func (b APIBlock) Block() protocol.Block {
	switch b.Type {
	case "text":
		return protocol.Block{Type: "text", Text: b.Text}
	case "thinking":
		return protocol.Block{Type: "thinking", Text: b.Thinking}
	case "tool_use":
		return protocol.Block{Type: "toolCall", ToolCallID: b.ID, ToolName: b.Name, Args: b.Input}
	case "tool_result":
		return protocol.Block{Type: "text", Text: ResultText(b.Content)}
	}
	return protocol.Block{Type: "unavailable"}
}
