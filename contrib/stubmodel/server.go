// Package stubmodel is a scripted OpenAI-compatible chat-completions server
// on 127.0.0.1, so the real Pi can stream text, call its bash tool, queue
// and abort in tests without any real model or credentials.
//
// Pi reaches it through a models.json custom provider (see WriteAgentDir)
// with api "openai-completions". Every answer is streamed as SSE and, unless
// the turn is endless, ends with a finish_reason and a usage chunk, which
// Pi needs to finish a message.
package stubmodel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Request is one request the server received, kept as evidence.
type Request struct {
	N            int             `json:"n"`
	Path         string          `json:"path"`
	AuthPresent  bool            `json:"authPresent"`
	Body         json.RawMessage `json:"body"`
	LastUserText string          `json:"lastUserText"`
	// Disconnected is set when the client went away before the answer
	// ended (an abort during a stream).
	Disconnected bool `json:"disconnected"`
}

// Server is a running stub model.
type Server struct {
	script Script
	ln     net.Listener
	srv    *http.Server
	done   chan struct{}

	mu       sync.Mutex
	next     int
	requests []Request
	changed  chan struct{}
}

// Start listens on a random 127.0.0.1 port and serves script.
func Start(script Script) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("stubmodel: listen: %w", err)
	}
	s := &Server{script: script, ln: ln, done: make(chan struct{}), changed: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/chat/completions", s.handleCompletions)
	mux.HandleFunc("/v1/models", s.handleModels)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// BaseURL is the OpenAI base URL to configure in Pi (ends in /v1).
func (s *Server) BaseURL() string { return "http://" + s.ln.Addr().String() + "/v1" }

// Close stops the server and ends any endless stream.
func (s *Server) Close() error {
	select {
	case <-s.done:
		return nil
	default:
	}
	close(s.done)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		return fmt.Errorf("stubmodel: shutdown: %w", err)
	}
	return nil
}

// Requests returns a copy of the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// WaitRequests blocks until at least n requests arrived or ctx ends.
func (s *Server) WaitRequests(ctx context.Context, n int) ([]Request, error) {
	for {
		s.mu.Lock()
		if len(s.requests) >= n {
			r := append([]Request(nil), s.requests...)
			s.mu.Unlock()
			return r, nil
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return s.Requests(), fmt.Errorf("stubmodel: waiting for %d requests: %w", n, ctx.Err())
		}
	}
}

func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Server) handleModels(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"`+DefaultModel+`","object":"model","owned_by":"stub"}]}`)
}

func (s *Server) handleCompletions(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	n := len(s.requests) + 1
	var turn Turn
	scripted := s.next < len(s.script.Turns)
	if scripted {
		turn = s.script.Turns[s.next]
		s.next++
	}
	req := Request{N: n, Path: r.URL.Path, AuthPresent: r.Header.Get("Authorization") != "", Body: json.RawMessage(body), LastUserText: lastUserText(body)}
	s.requests = append(s.requests, req)
	s.notifyLocked()
	s.mu.Unlock()
	if !scripted {
		turn = Turn{Text: DefaultAnswer(req.LastUserText)}
	}

	if turn.Error != "" {
		status := turn.Status
		if status == 0 {
			status = http.StatusInternalServerError
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": turn.Error, "type": "stub_error"}})
		return
	}

	st := &sseStream{w: w, id: fmt.Sprintf("chatcmpl-%d", n), ctx: r.Context(), done: s.done}
	if err := st.run(turn, n); err != nil {
		s.mu.Lock()
		s.requests[n-1].Disconnected = true
		s.notifyLocked()
		s.mu.Unlock()
	}
}

// lastUserText digs the last user message's text out of a chat request.
func lastUserText(body []byte) string {
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &req) != nil {
		return ""
	}
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := req.Messages[i]
		if m.Role != "user" {
			continue
		}
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			return s
		}
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(m.Content, &parts) == nil {
			var b strings.Builder
			for _, p := range parts {
				if p.Type == "text" {
					b.WriteString(p.Text)
				}
			}
			return b.String()
		}
	}
	return ""
}

var errGone = errors.New("client gone")

type sseStream struct {
	w    http.ResponseWriter
	id   string
	ctx  context.Context
	done chan struct{}
}

func (st *sseStream) send(delta map[string]any, finish any, extra map[string]any) error {
	choice := map[string]any{"index": 0, "delta": delta, "finish_reason": finish}
	chunk := map[string]any{
		"id": st.id, "object": "chat.completion.chunk", "created": time.Now().Unix(),
		"model": DefaultModel, "choices": []any{choice},
	}
	if delta == nil {
		chunk["choices"] = []any{}
	}
	for k, v := range extra {
		chunk[k] = v
	}
	b, err := json.Marshal(chunk)
	if err != nil {
		return fmt.Errorf("encode chunk: %w", err)
	}
	if _, err := fmt.Fprintf(st.w, "data: %s\n\n", b); err != nil {
		return errGone
	}
	if f, ok := st.w.(http.Flusher); ok {
		f.Flush()
	}
	return nil
}

func (st *sseStream) pause(d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-st.ctx.Done():
		return errGone
	case <-st.done:
		return errGone
	}
}

// maxEndless bounds an endless stream so a forgotten test cannot leave it
// running for ever.
const maxEndless = 10 * time.Minute

func (st *sseStream) run(turn Turn, n int) error {
	h := st.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	st.w.WriteHeader(http.StatusOK)
	delay := turn.ChunkDelay()
	if err := st.send(map[string]any{"role": "assistant", "content": ""}, nil, nil); err != nil {
		return err
	}
	for _, c := range turn.Chunks() {
		if err := st.pause(delay); err != nil {
			return err
		}
		if err := st.send(map[string]any{"content": c}, nil, nil); err != nil {
			return err
		}
	}
	if turn.Endless {
		deadline := time.Now().Add(maxEndless)
		for i := 0; time.Now().Before(deadline); i++ {
			if err := st.pause(delay); err != nil {
				return err
			}
			if err := st.send(map[string]any{"content": fmt.Sprintf("w%d ", i)}, nil, nil); err != nil {
				return err
			}
		}
		return errGone
	}
	finish := "stop"
	if turn.Tool != nil {
		finish = "tool_calls"
		id := turn.Tool.ID
		if id == "" {
			id = fmt.Sprintf("call_%d", n)
		}
		first := map[string]any{"tool_calls": []any{map[string]any{
			"index": 0, "id": id, "type": "function",
			"function": map[string]any{"name": turn.Tool.ToolName(), "arguments": ""},
		}}}
		if err := st.send(first, nil, nil); err != nil {
			return err
		}
		for _, part := range splitN(turn.Tool.ToolArgsJSON(), 4) {
			if err := st.pause(delay); err != nil {
				return err
			}
			d := map[string]any{"tool_calls": []any{map[string]any{
				"index": 0, "function": map[string]any{"arguments": part},
			}}}
			if err := st.send(d, nil, nil); err != nil {
				return err
			}
		}
	}
	if err := st.send(map[string]any{}, finish, nil); err != nil {
		return err
	}
	usage := map[string]any{"prompt_tokens": 100 + n, "completion_tokens": 20, "total_tokens": 120 + n}
	if err := st.send(nil, nil, map[string]any{"usage": usage}); err != nil {
		return err
	}
	if _, err := io.WriteString(st.w, "data: [DONE]\n\n"); err != nil {
		return errGone
	}
	if f, ok := st.w.(http.Flusher); ok {
		f.Flush()
	}
	return nil
}

// splitN cuts s into at most n pieces on rune boundaries.
func splitN(s string, n int) []string {
	r := []rune(s)
	if len(r) == 0 {
		return nil
	}
	size := (len(r) + n - 1) / n
	var out []string
	for len(r) > 0 {
		k := min(size, len(r))
		out = append(out, string(r[:k]))
		r = r[k:]
	}
	return out
}
