package fakeanthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// MaxBody bounds a request body the fake reads. The CLI sends its whole
// system prompt and tool list (about 55 KB) plus the history.
const MaxBody = 16 << 20

// Request is what the fake saw of one HTTP request and how it replied.
type Request struct {
	N      int    `json:"n"`
	Method string `json:"method"`
	Path   string `json:"path"`
	Host   string `json:"host"`
	APIKey string `json:"apiKey,omitempty"`
	// Session is the X-Claude-Code-Session-Id header.
	Session string `json:"session,omitempty"`
	Model   string `json:"model,omitempty"`
	// Reply is text, tool, hang, slow or unexpected; Arg is its text or command.
	Reply string `json:"reply"`
	Arg   string `json:"arg,omitempty"`
	// Messages counts the request's messages.
	Messages int `json:"messages"`
	// Unexpected is set for anything but POST /v1/messages.
	Unexpected bool `json:"unexpected,omitempty"`
}

// Server is one running fake.
type Server struct {
	// URL is http://127.0.0.1:PORT, the CLI's ANTHROPIC_BASE_URL.
	URL string

	srv *http.Server
	ln  net.Listener
	mu  sync.Mutex
	log []Request
	// bodies holds each POST /v1/messages body once KeepBodies was called.
	bodies [][]byte
	keep   bool
	wake   chan struct{}
	done   chan struct{}
}

// Start listens on a free loopback port and serves until Close.
func Start() (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("fakeanthropic: listen on loopback: %w", err)
	}
	s := &Server{URL: "http://" + ln.Addr().String(), ln: ln, wake: make(chan struct{}), done: make(chan struct{})}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.mu.Lock()
			s.log = append(s.log, Request{Reply: "serve-error", Arg: err.Error(), Unexpected: true})
			s.mu.Unlock()
		}
	}()
	return s, nil
}

// Close stops the server; hanging replies end.
func (s *Server) Close() error {
	err := s.srv.Close()
	<-s.done
	return err
}

// Requests returns a copy of the request log, in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.log...)
}

// KeepBodies makes the fake keep the body of every POST /v1/messages
// from now on (Bodies): recordings only, each body is up to MaxBody.
func (s *Server) KeepBodies() {
	s.mu.Lock()
	s.keep = true
	s.mu.Unlock()
}

// Bodies returns the kept bodies, in arrival order.
func (s *Server) Bodies() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.bodies...)
}

// Unexpected returns the requests that were not POST /v1/messages.
func (s *Server) Unexpected() []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.Unexpected {
			out = append(out, r)
		}
	}
	return out
}

// WaitRequests blocks until at least n requests were recorded or ctx ends.
func (s *Server) WaitRequests(ctx context.Context, n int) error {
	for {
		s.mu.Lock()
		got, wake := len(s.log), s.wake
		s.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return fmt.Errorf("fakeanthropic: %d of %d requests: %w", got, n, ctx.Err())
		}
	}
}

func (s *Server) record(r Request) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	r.N = len(s.log) + 1
	s.log = append(s.log, r)
	close(s.wake)
	s.wake = make(chan struct{})
	return r.N
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	req := Request{
		Method: r.Method, Path: r.URL.RequestURI(), Host: r.Host,
		APIKey: r.Header.Get("x-api-key"), Session: r.Header.Get("X-Claude-Code-Session-Id"),
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		req.Reply, req.Unexpected = "unexpected", true
		s.record(req)
		http.NotFound(w, r)
		return
	}
	var body messagesRequest
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err == nil {
		err = json.Unmarshal(raw, &body)
	}
	if err != nil {
		req.Reply, req.Arg, req.Unexpected = "unexpected", "undecodable body: "+err.Error(), true
		s.record(req)
		http.Error(w, "fakeanthropic: undecodable body", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	if s.keep {
		s.bodies = append(s.bodies, raw)
	}
	s.mu.Unlock()
	rep := script(body.Messages)
	req.Model, req.Messages, req.Reply, req.Arg = body.Model, len(body.Messages), rep.kind, rep.arg
	n := s.record(req)
	stream(r.Context(), w, n, body.Model, rep)
}
