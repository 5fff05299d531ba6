package stubmodel

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"
)

// Script is what a test wants the model to answer, one Turn per model
// call, in order. A call past the end of the script gets the default
// answer, "Plain answer to: <last user text>", so queued and follow-up
// prompts need no turn of their own. The same JSON shape is read by
// contrib/fakepi, so one script drives the fake Pi and the real Pi (through
// this server) alike.
type Script struct {
	Turns []Turn `json:"turns"`
}

// Turn is one model call's answer. Text chunks stream first, then the tool
// call, if any. Fields a consumer does not model are ignored by it (the
// stub ignores Dialog and FollowUp; the fake Pi ignores Status).
type Turn struct {
	// Text is streamed as one delta per element.
	Text []string `json:"text,omitempty"`
	// Bulk appends BulkText(Bulk) after Text: that many bytes of
	// generated text, streamed in BulkChunk deltas, for answers too large
	// to write into a script (the 18 MiB answer of issue 10).
	Bulk int `json:"bulk,omitempty"`
	// Tool, when set, makes the answer end in one bash tool call.
	Tool *ToolCall `json:"tool,omitempty"`
	// Endless keeps streaming text chunks until the client goes away (an
	// abort) or the server closes; finish_reason is then never reached.
	Endless bool `json:"endless,omitempty"`
	// ChunkDelayMS paces the chunks; 0 means DefaultChunkDelay.
	ChunkDelayMS int `json:"chunkDelayMs,omitempty"`
	// Error makes the call fail: the stub answers HTTP Status (default
	// 500) with this message; the fake Pi ends the assistant message with
	// stopReason "error" and this errorMessage.
	Error string `json:"error,omitempty"`
	// Status is the HTTP status for Error (stub only).
	Status int `json:"status,omitempty"`
	// Retryable marks an Error that Pi's auto-retry takes (fake Pi only:
	// agent_end willRetry:true, auto_retry_start, a second run).
	Retryable bool `json:"retryable,omitempty"`
	// Dialog makes an extension open a dialog before this model call
	// (fake Pi only): extension_ui_request, then wait for the response.
	Dialog *Dialog `json:"dialog,omitempty"`
	// FollowUp is queued in Pi's native follow-up queue by an extension
	// when this turn ends (fake Pi only), as an extension's
	// sendUserMessage(..., {deliverAs: "followUp"}) would.
	FollowUp string `json:"followUp,omitempty"`
	// Notify is written as extension notifications back to back before
	// this model call (fake Pi only), as an extension calling
	// ctx.ui.notify in a loop does: fire-and-forget, nothing answers.
	Notify []string `json:"notify,omitempty"`
}

// ToolCall is a bash tool call, or (stub only) a call of another tool
// an extension registered.
type ToolCall struct {
	// ID is the tool call id; empty means "call_<n>".
	ID string `json:"id,omitempty"`
	// Command is the bash command line.
	Command string `json:"command"`
	// Name and Args call the named tool with these JSON arguments instead
	// of bash (the stub only: the fake Pi has only bash).
	Name string          `json:"name,omitempty"`
	Args json.RawMessage `json:"args,omitempty"`
}

// ToolName is the tool the call names: bash unless Name is set.
func (c ToolCall) ToolName() string {
	if c.Name != "" {
		return c.Name
	}
	return "bash"
}

// Dialog is an extension UI dialog request.
type Dialog struct {
	Method      string   `json:"method"` // select, confirm, input, editor
	Title       string   `json:"title"`
	Message     string   `json:"message,omitempty"`
	Options     []string `json:"options,omitempty"`
	Placeholder string   `json:"placeholder,omitempty"`
	Prefill     string   `json:"prefill,omitempty"`
	TimeoutMS   int      `json:"timeout,omitempty"`
	// Repeat asks the dialog this many times in a row (0 and 1: once),
	// each after the previous one ended, as an extension that calls
	// ctx.ui.confirm in a loop does (the fake Pi only).
	Repeat int `json:"repeat,omitempty"`
}

// BulkChunk is the size of one streamed delta of a Bulk answer.
const BulkChunk = 256 << 10

// Chunks returns the deltas of the turn's text: Text, then the Bulk text
// cut into BulkChunk pieces.
func (t Turn) Chunks() []string {
	if t.Bulk <= 0 {
		return t.Text
	}
	out := append([]string(nil), t.Text...)
	bulk := BulkText(t.Bulk)
	for len(bulk) > BulkChunk {
		out = append(out, bulk[:BulkChunk])
		bulk = bulk[BulkChunk:]
	}
	return append(out, bulk)
}

// BulkText is n bytes of numbered 64-byte lines ("00000001 bulk ...\n"),
// cut short at n, so a reader can check a large text whole and see where
// a copy of it stops.
func BulkText(n int) string {
	var b strings.Builder
	b.Grow(n + 64)
	for i := 1; b.Len() < n; i++ {
		fmt.Fprintf(&b, "%08d bulk %049d\n", i, i)
	}
	return b.String()[:n]
}

// DefaultChunkDelay paces streamed chunks when a turn sets none.
const DefaultChunkDelay = 20 * time.Millisecond

// ChunkDelay returns the turn's pacing.
func (t Turn) ChunkDelay() time.Duration {
	if t.ChunkDelayMS > 0 {
		return time.Duration(t.ChunkDelayMS) * time.Millisecond
	}
	return DefaultChunkDelay
}

// DefaultAnswer is the text chunks of the answer to a call past the end of
// the script, as in the recordings of real Pi runs.
func DefaultAnswer(lastUserText string) []string {
	return []string{"Plain ", "answer ", "to: ", lastUserText}
}

// ToolArgsJSON is the tool call's arguments as the model streams them.
func (c ToolCall) ToolArgsJSON() string {
	if c.Name != "" {
		return string(c.Args)
	}
	b, _ := json.Marshal(map[string]string{"command": c.Command})
	return string(b)
}

// LoadScript reads a Script from a JSON file.
func LoadScript(path string) (Script, error) {
	var s Script
	b, err := os.ReadFile(path)
	if err != nil {
		return s, fmt.Errorf("read script: %w", err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("parse script %s: %w", path, err)
	}
	return s, nil
}

// WriteScript writes s as JSON to path.
func WriteScript(path string, s Script) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encode script: %w", err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("write script: %w", err)
	}
	return nil
}
