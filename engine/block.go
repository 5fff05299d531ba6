package engine

import (
	"encoding/json"

	"github.com/mosaic-agents/mosaic/protocol"
)

// NativeBlock is one of Pi's content blocks (text, thinking, toolCall or
// image), as its events and its session file carry them; history decodes
// the file's blocks with it so both convert through Block.
type NativeBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	Thinking  string          `json:"thinking,omitempty"`
	Redacted  bool            `json:"redacted,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	MimeType  string          `json:"mimeType,omitempty"`
}

// Block converts a native content block; an unknown type keeps its place
// (ordinals stay right) but none of its content. Redacted reasoning is
// unavailable with empty text (seed 003, Parser), so a live message and the
// same message re-read from the session file agree.
func (b NativeBlock) Block() protocol.Block {
	switch b.Type {
	case "text":
		return protocol.Block{Type: "text", Text: b.Text}
	case "thinking":
		if b.Redacted {
			return protocol.Block{Type: "unavailable"}
		}
		return protocol.Block{Type: "thinking", Text: b.Thinking}
	case "toolCall":
		return protocol.Block{Type: "toolCall", ToolCallID: b.ID, ToolName: b.Name, Args: b.Arguments}
	case "image":
		return protocol.Block{Type: "image", MimeType: b.MimeType}
	}
	return protocol.Block{Type: "unavailable"}
}
