package fakepi

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// command is the part of an RPC command line the fake reads.
type command struct {
	ID                json.RawMessage `json:"id"`
	Type              *string         `json:"type"`
	Message           *string         `json:"message"`
	StreamingBehavior string          `json:"streamingBehavior"`
	Since             *string         `json:"since"`
	Level             string          `json:"level"`
	Enabled           *bool           `json:"enabled"`
}

// errCrash is returned for input that crashes the pinned Pi (a JSON
// null command line): it exits 1 with a TypeError on stderr.
var errCrash = errors.New("TypeError: Cannot read properties of null (reading 'id')")

// parseErrorText renders a JSON syntax error in V8's words for the
// common cases, so the parse response reads like Pi's.
func parseErrorText(line []byte, err error) string {
	var se *json.SyntaxError
	pos := 0
	if errors.As(err, &se) {
		pos = int(se.Offset) - 1
	}
	if pos < 0 {
		pos = 0
	}
	lineNo, col := 1, 1
	for i := 0; i < pos && i < len(line); i++ {
		if line[i] == '\n' {
			lineNo, col = lineNo+1, 1
		} else {
			col++
		}
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "unexpected end of JSON input"):
		return "Unexpected end of JSON input"
	case strings.Contains(msg, "looking for beginning of object key string"):
		return fmt.Sprintf("Expected property name or '}' in JSON at position %d (line %d column %d)", pos, lineNo, col)
	case pos < len(line):
		src := string(line)
		if len(src) > 30 {
			src = src[:30] + "..."
		}
		return fmt.Sprintf("Unexpected token '%c', \"%s\" is not valid JSON", line[pos], src)
	}
	return msg
}

// handleLine handles one stdin record. It returns errCrash when the real
// Pi would crash on it.
func (e *engine) handleLine(line []byte) error {
	var raw json.RawMessage
	if err := json.Unmarshal(line, &raw); err != nil {
		e.mu.Lock()
		e.respondErr(nil, "parse", "Failed to parse command: "+parseErrorText(line, err))
		e.mu.Unlock()
		return nil
	}
	if string(raw) == "null" {
		return errCrash
	}
	var c command
	if err := json.Unmarshal(raw, &c); err != nil {
		// A JSON value that is not an object: no type, no id.
		c = command{}
	}
	typ := ""
	if c.Type != nil {
		typ = *c.Type
	}
	switch typ {
	case "extension_ui_response":
		var r struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(raw, &r)
		e.mu.Lock()
		ch := e.dialogs[r.ID]
		e.mu.Unlock()
		if ch != nil {
			select {
			case ch <- raw:
			default:
			}
		}
	case "prompt":
		e.prompt(c)
	case "steer", "follow_up":
		e.mu.Lock()
		defer e.mu.Unlock()
		if c.Message == nil {
			e.respondErr(c.ID, typ, "Cannot read properties of undefined (reading 'startsWith')")
			return nil
		}
		if typ == "steer" {
			e.queueSteer(*c.Message)
		} else {
			e.queueFollowUp(*c.Message)
		}
		e.respondOK(c.ID, typ, nil)
	case "abort":
		e.abort(c)
	case "clear_queue":
		e.pause(PointClearQueueReceived, nil)
		e.mu.Lock()
		defer e.mu.Unlock()
		data := obj{{"steering", append([]string{}, e.steering...)}, {"followUp", append([]string{}, e.followUp...)}}
		e.steering, e.followUp, e.aSteer, e.aFollow = nil, nil, nil, nil
		e.queueUpdate()
		e.respondOK(c.ID, typ, data)
	case "get_state":
		e.mu.Lock()
		defer e.mu.Unlock()
		e.respondOK(c.ID, typ, obj{{"model", e.model}, {"thinkingLevel", e.thinking}, {"isStreaming", e.streaming},
			{"isCompacting", false}, {"steeringMode", "one-at-a-time"}, {"followUpMode", "one-at-a-time"},
			{"sessionFile", e.sess.path}, {"sessionId", e.sess.id}, {"autoCompactionEnabled", true},
			{"messageCount", len(e.messages)}, {"pendingMessageCount", len(e.steering) + len(e.followUp)}})
	case "get_messages":
		e.mu.Lock()
		defer e.mu.Unlock()
		msgs := make([]any, 0, len(e.messages))
		for _, m := range e.messages {
			msgs = append(msgs, m)
		}
		e.respondOK(c.ID, typ, obj{{"messages", msgs}})
	case "get_entries":
		e.mu.Lock()
		defer e.mu.Unlock()
		since := ""
		if c.Since != nil {
			since = *c.Since
		}
		entries, ok := e.sess.entriesSince(since)
		if !ok {
			e.respondErr(c.ID, typ, "Entry not found: "+since)
			return nil
		}
		e.respondOK(c.ID, typ, obj{{"entries", entries}, {"leafId", nullable(e.sess.leaf)}})
	case "get_tree":
		e.mu.Lock()
		defer e.mu.Unlock()
		e.respondOK(c.ID, typ, obj{{"tree", e.sess.tree()}, {"leafId", nullable(e.sess.leaf)}})
	case "get_commands":
		e.mu.Lock()
		defer e.mu.Unlock()
		// Pi's bundled llama.cpp router registers this inline extension
		// command even under --no-extensions.
		llama := obj{{"name", "llama"}, {"description", "Manage llama.cpp router models"}, {"source", "extension"},
			{"sourceInfo", obj{{"path", "<inline:llama.cpp>"}, {"source", "inline"}, {"scope", "temporary"}, {"origin", "top-level"}}}}
		e.respondOK(c.ID, typ, obj{{"commands", []any{llama}}})
	case "get_last_assistant_text":
		e.mu.Lock()
		defer e.mu.Unlock()
		var text any
		for i := len(e.messages) - 1; i >= 0; i-- {
			if e.messages[i].get("role") == "assistant" {
				text = messageText(e.messages[i])
				break
			}
		}
		e.respondOK(c.ID, typ, obj{{"text", text}})
	case "set_thinking_level":
		e.mu.Lock()
		defer e.mu.Unlock()
		e.thinking = c.Level
		if _, err := e.sess.append("thinking_level_change", obj{{"thinkingLevel", c.Level}}); err != nil {
			e.respondErr(c.ID, typ, err.Error())
			return nil
		}
		e.respondOK(c.ID, typ, nil)
	case "set_auto_retry":
		e.mu.Lock()
		defer e.mu.Unlock()
		e.autoRetry = c.Enabled != nil && *c.Enabled
		e.respondOK(c.ID, typ, nil)
	case "abort_retry":
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.retryCancel != nil {
			e.retryCancel()
		}
		e.respondOK(c.ID, typ, nil)
	case "new_session", "set_model", "cycle_model", "get_available_models", "cycle_thinking_level",
		"get_available_thinking_levels", "set_steering_mode", "set_follow_up_mode", "compact",
		"set_auto_compaction", "bash", "abort_bash", "get_session_stats", "export_html", "switch_session",
		"fork", "clone", "get_fork_messages", "set_session_name":
		e.mu.Lock()
		defer e.mu.Unlock()
		e.respondErr(c.ID, typ, "fakepi does not model the "+typ+" command")
	default:
		e.mu.Lock()
		defer e.mu.Unlock()
		name := typ
		if c.Type == nil {
			name = "undefined"
		}
		e.respondErr(c.ID, typ, "Unknown command: "+name)
	}
	return nil
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// prompt is Pi's prompt preflight, run on the reader as the recordings
// order it: refusal or queueing while streaming, the model check, then the
// response and, after it, the run.
func (e *engine) prompt(c command) {
	msg := ""
	if c.Message != nil {
		msg = *c.Message
	}
	e.pause(PointPromptReceived, map[string]any{"id": string(c.ID), "message": msg})
	e.mu.Lock()
	if c.Message == nil {
		e.respondErr(c.ID, "prompt", "Cannot read properties of undefined (reading 'startsWith')")
		e.mu.Unlock()
		return
	}
	if e.streaming {
		switch c.StreamingBehavior {
		case "":
			e.respondErr(c.ID, "prompt", busyText)
			e.mu.Unlock()
			return
		case "followUp":
			e.queueFollowUp(msg)
		default:
			e.queueSteer(msg)
		}
		e.mu.Unlock()
		e.pause(PointBeforeResponse, map[string]any{"id": string(c.ID), "queued": true})
		e.mu.Lock()
		e.respondOK(c.ID, "prompt", nil)
		e.mu.Unlock()
		return
	}
	if !e.hasModel {
		e.respondErr(c.ID, "prompt", noAPIKeyText)
		e.mu.Unlock()
		return
	}
	e.mu.Unlock()
	e.pause(PointBeforeResponse, map[string]any{"id": string(c.ID), "queued": false})
	e.mu.Lock()
	user := userMessage(msg, e.now())
	e.respondOK(c.ID, "prompt", nil)
	e.streaming = true
	idle := make(chan struct{})
	e.idle = idle
	e.mu.Unlock()
	go e.runPrompt([]obj{user}, idle)
}

// abort is Pi's abort: cancel any retry wait and the agent's signal, wait
// until the session is idle (agent_settled written), then respond.
func (e *engine) abort(c command) {
	e.pause(PointAbortReceived, nil)
	e.mu.Lock()
	if e.retryCancel != nil {
		e.retryCancel()
	}
	if e.runCancel != nil {
		e.runCancel()
	}
	if !e.streaming {
		e.mu.Unlock()
		go func() {
			e.pause(PointBeforeAbortResponse, nil)
			e.mu.Lock()
			e.respondOK(c.ID, "abort", nil)
			e.mu.Unlock()
		}()
		return
	}
	idle := e.idle
	e.mu.Unlock()
	go func() {
		<-idle
		e.pause(PointBeforeAbortResponse, nil)
		e.mu.Lock()
		e.respondOK(c.ID, "abort", nil)
		e.mu.Unlock()
	}()
}
