package web_test

import (
	"context"
	"log"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/protocol"
)

// TestWebRefusalLogBounded: a refused request with a path of half a
// megabyte is logged with the path cut, and a flood of refusals of one
// code is written whole only up to audit.Burst per window, the rest
// counted into one entry at the end.
func TestWebRefusalLogBounded(t *testing.T) {
	var logs logLines
	o := noConversations
	o.Log = log.New(&logs, "", 0)
	srv, l, s := newServer(t, o)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.Serve(ctx, l); close(done) }()
	long := "/api/c/" + strings.Repeat("x", 512<<10)
	const flood = 100
	for i := range flood {
		path := "/api/conversations"
		if i == 0 {
			path = long
		}
		r, err := browser(t).Get(s.base + path)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
	}
	cancel()
	<-done
	logs.mu.Lock()
	defer logs.mu.Unlock()
	for _, line := range logs.lines {
		if len(line) > 4*audit.MaxMessage {
			t.Fatalf("a log line of %d bytes: %.200q…", len(line), line)
		}
	}
	written, summary := 0, false
	for _, line := range logs.lines {
		if strings.Contains(line, protocol.CodeWebAuth) {
			written++
			summary = summary || strings.Contains(line, `"MOSAIC_COUNT":"`)
		}
	}
	if written > audit.Burst+1 || !summary {
		t.Fatalf("%d refusals logged as %d lines (want at most %d and a count of the rest)", flood, written, audit.Burst+1)
	}
}

// TestWebIdleDespiteRefusals: requests that are all refused do not keep
// the server from idling out.
func TestWebIdleDespiteRefusals(t *testing.T) {
	o := noConversations
	o.Idle = 200 * time.Millisecond
	srv, l, s := newServer(t, o)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(context.Background(), l) }()
	c := &http.Client{Timeout: time.Second}
	for i := 0; ; i++ {
		select {
		case <-done:
			return
		default:
		}
		if i == 600 {
			t.Fatal("the server never idled out while every request was refused")
		}
		if r, err := c.Get(s.base + "/api/conversations"); err == nil {
			r.Body.Close()
		}
		time.Sleep(20 * time.Millisecond)
	}
}
