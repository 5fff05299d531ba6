package claude

import (
	"encoding/json"

	hclaude "github.com/mosaic-agents/mosaic/history/claude"
)

// frame is one decoded stdout line of the CLI. Only the fields the
// adapter reads are decoded; content it passes on stays raw JSON.
type frame struct {
	Type            string          `json:"type"`
	Subtype         string          `json:"subtype,omitempty"`
	SessionID       string          `json:"session_id,omitempty"`
	UUID            string          `json:"uuid,omitempty"`
	ParentToolUseID *string         `json:"parent_tool_use_id,omitempty"`
	Event           *streamEvent    `json:"event,omitempty"`
	APIMessageID    string          `json:"api_message_id,omitempty"`
	Message         json.RawMessage `json:"message,omitempty"`
	// Content is a system frame's content (announced.go).
	Content json.RawMessage `json:"content,omitempty"`
	// A compact_boundary system frame's (announced.go).
	LogicalParentUUID string          `json:"logical_parent_uuid,omitempty"`
	CompactMetadata   json.RawMessage `json:"compact_metadata,omitempty"`
	// A task_notification system frame's (announced.go).
	TaskID     string `json:"task_id,omitempty"`
	ToolUseID  string `json:"tool_use_id,omitempty"`
	OutputFile string `json:"output_file,omitempty"`
	Status     string `json:"status,omitempty"`
	Summary    string `json:"summary,omitempty"`

	// command_lifecycle
	CommandUUID string `json:"command_uuid,omitempty"`
	State       string `json:"state,omitempty"`

	// An assistant frame the CLI made up for an API error (no stream, model
	// "<synthetic>": "Not logged in", an invalid key, an overload): what
	// went wrong, which the message's stop_reason does not say. Raw, so
	// that another frame's "error" of another shape never fails a decode.
	APIError          json.RawMessage `json:"error,omitempty"`
	IsAPIErrorMessage bool            `json:"is_api_error_message,omitempty"`

	// result
	IsError        bool   `json:"is_error,omitempty"`
	TerminalReason string `json:"terminal_reason,omitempty"`

	// control_request, control_cancel_request, control_response
	RequestID string           `json:"request_id,omitempty"`
	Request   json.RawMessage  `json:"request,omitempty"`
	Response  *controlResponse `json:"response,omitempty"`
}

type streamEvent struct {
	Type         string            `json:"type"`
	Index        int               `json:"index"`
	Message      *apiMessage       `json:"message,omitempty"`
	ContentBlock *hclaude.APIBlock `json:"content_block,omitempty"`
	Delta        *delta            `json:"delta,omitempty"`
}

type delta struct {
	Type        string `json:"type"`
	Text        string `json:"text,omitempty"`
	Thinking    string `json:"thinking,omitempty"`
	PartialJSON string `json:"partial_json,omitempty"`
	StopReason  string `json:"stop_reason,omitempty"`
}

type apiMessage struct {
	ID         string          `json:"id"`
	Role       string          `json:"role"`
	Model      string          `json:"model,omitempty"`
	Content    json.RawMessage `json:"content"`
	StopReason *string         `json:"stop_reason"`
}

type controlResponse struct {
	Subtype   string          `json:"subtype"`
	RequestID string          `json:"request_id"`
	Error     string          `json:"error,omitempty"`
	Response  json.RawMessage `json:"response,omitempty"`
	// Pending is set on an initialize response: the can_use_tool
	// requests still unanswered, each the whole original frame.
	Pending []frame `json:"pending_permission_requests,omitempty"`
	// cut says framing reduced the line: a pending request in it offers
	// deny only, as a live one whose line was cut does.
	cut bool
}

// canUseTool is the request of a can_use_tool control request.
type canUseTool struct {
	Subtype        string          `json:"subtype"`
	ToolName       string          `json:"tool_name"`
	DisplayName    string          `json:"display_name"`
	Input          json.RawMessage `json:"input"`
	Description    string          `json:"description"`
	DecisionReason string          `json:"decision_reason"`
	ToolUseID      string          `json:"tool_use_id"`
}

// interruptReceipt is the interrupt control response's body.
type interruptReceipt struct {
	StillQueued []string `json:"still_queued"`
	Cancelled   []string `json:"cancelled"`
}
