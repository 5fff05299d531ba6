package fakeanthropic

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// SlowChunks and SlowDelay shape the SLOW reply: SlowChunks text deltas
// "s00 ", "s01 ", ..., SlowDelay apart (SlowText is the whole text).
const (
	SlowChunks = 20
	SlowDelay  = 300 * time.Millisecond
)

// FullContextTokens is the input_tokens a FULLCONTEXT reply reports: near
// the pinned CLI's default model's 1M context window, so the CLI
// compacts before its next request.
const FullContextTokens = 995000

// SlowText is the text the SLOW reply streams, whole.
func SlowText() string {
	var b strings.Builder
	for i := range SlowChunks {
		fmt.Fprintf(&b, "s%02d ", i)
	}
	return b.String()
}

// stream writes rep as the SSE events the Messages API streams:
// message_start, per block content_block_start/delta.../stop,
// message_delta with the stop reason, message_stop.
func stream(ctx context.Context, w http.ResponseWriter, n int, model string, rep reply) {
	id := fmt.Sprintf("msg_fake_%03d", n)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("request-id", fmt.Sprintf("req_fake_%03d", n))
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	send := func(ev map[string]any) {
		b, _ := json.Marshal(ev)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev["type"], b)
		if fl != nil {
			fl.Flush()
		}
	}
	input := 100 + n
	if rep.full {
		input = FullContextTokens
	}
	send(map[string]any{"type": "message_start", "message": map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": input, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
	}})
	textBlock := func(i int, text string, last bool) {
		send(map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "text", "text": ""}})
		for _, part := range halves(text) {
			send(map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "text_delta", "text": part}})
		}
		if last {
			send(map[string]any{"type": "content_block_stop", "index": i})
		}
	}
	stop := "end_turn"
	switch rep.kind {
	case "hang":
		textBlock(0, "Working on it", false)
		<-ctx.Done()
		return
	case "slow":
		send(map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		for i := range SlowChunks {
			select {
			case <-ctx.Done():
				return
			case <-time.After(SlowDelay):
			}
			send(map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": fmt.Sprintf("s%02d ", i)}})
		}
		send(map[string]any{"type": "content_block_stop", "index": 0})
	case "tool":
		textBlock(0, "I will run it.", true)
		args := map[string]any{"command": rep.arg, "description": "fake scripted command"}
		if rep.bg {
			args["run_in_background"] = true
		}
		input, _ := json.Marshal(args)
		send(map[string]any{"type": "content_block_start", "index": 1, "content_block": map[string]any{
			"type": "tool_use", "id": fmt.Sprintf("toolu_fake_%03d", n), "name": "Bash", "input": map[string]any{}}})
		for _, part := range halves(string(input)) {
			send(map[string]any{"type": "content_block_delta", "index": 1, "delta": map[string]any{"type": "input_json_delta", "partial_json": part}})
		}
		send(map[string]any{"type": "content_block_stop", "index": 1})
		stop = "tool_use"
	default:
		textBlock(0, rep.arg, true)
	}
	send(map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 20}})
	send(map[string]any{"type": "message_stop"})
}

// halves splits s in two deltas (at a rune boundary), so every reply
// streams more than one fragment.
func halves(s string) []string {
	r := []rune(s)
	if len(r) < 2 {
		return []string{s}
	}
	return []string{string(r[:len(r)/2]), string(r[len(r)/2:])}
}
