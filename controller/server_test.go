package controller

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/activation"
	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/protocol"
)

// syncBuffer is an audit sink tests can read while the server writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// entries returns the audit entries written so far.
func (s *syncBuffer) entries(t *testing.T) []map[string]string {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]string
	for _, line := range bytes.Split(bytes.TrimSpace(s.b.Bytes()), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var m map[string]string
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

type harness struct {
	path  string
	audit *syncBuffer
}

func start(t *testing.T, mutate func(*Server)) *harness {
	t.Helper()
	path := filepath.Join(t.TempDir(), "c.sock")
	l, err := activation.Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	buf := &syncBuffer{}
	s := &Server{Conversation: "pi-test", Version: "mosaic/test", UID: os.Getuid(), MaxLine: 4096,
		Audit: audit.NewWriter("pi-test", buf)}
	if mutate != nil {
		mutate(s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return after cancel")
		}
	})
	return &harness{path: path, audit: buf}
}

type client struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func (h *harness) dial(t *testing.T) *client {
	t.Helper()
	c, err := net.Dial("unix", h.path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return &client{t: t, c: c, r: bufio.NewReader(c)}
}

func (k *client) send(s string) {
	k.t.Helper()
	if _, err := k.c.Write([]byte(s)); err != nil {
		k.t.Fatalf("write: %v", err)
	}
}

func (k *client) read() map[string]any {
	k.t.Helper()
	line, err := k.r.ReadBytes('\n')
	if err != nil {
		k.t.Fatalf("read: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		k.t.Fatalf("record %q: %v", line, err)
	}
	return m
}

// closed reports whether the server closed the connection: an EOF, not a
// timeout. An open connection is proven by a probe that gets an answer.
func (k *client) closed() bool {
	k.t.Helper()
	k.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := k.r.ReadByte()
	if err == nil {
		k.t.Fatal("unexpected data after the refusal")
	}
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
}

// open proves the connection still serves: a probe line gets a refusal.
func (k *client) open() bool {
	k.t.Helper()
	k.send(`{"type":"probe"}` + "\n")
	r := k.read()
	return r["record"] == "refusal" && r["code"] == protocol.CodeUnknownCommand
}

func (k *client) hello() map[string]any {
	k.t.Helper()
	k.send(`{"type":"hello","client":"test","protocol":1}` + "\n")
	w := k.read()
	if w["record"] != "welcome" {
		k.t.Fatalf("hello answered %v, want welcome", w)
	}
	return w
}

func TestWelcome(t *testing.T) {
	h := start(t, nil)
	a, b := h.dial(t), h.dial(t)
	wa := a.hello()
	b.send(`{"type":"hello"}` + "\n") // the bare hello is valid
	wb := b.read()
	for _, w := range []map[string]any{wa, wb} {
		if w["conversation"] != "pi-test" || w["mode"] != "observer" || w["server"] != "mosaic/test" || w["protocol"] != float64(1) || w["starting"] != nil {
			t.Errorf("welcome %v", w)
		}
	}
	if wa["connection"] == wb["connection"] || wa["connection"] == "" {
		t.Errorf("connection ids %v and %v must be distinct and set", wa["connection"], wb["connection"])
	}
}

func TestBadInput(t *testing.T) {
	long := `{"type":"hello","client":"` + strings.Repeat("x", 5000) + `"}` + "\n"
	tests := []struct {
		name        string
		beforeHello bool
		line        string
		code        string
		closes      bool
	}{
		{"malformed json first", true, "{nope\n", protocol.CodeMalformed, true},
		{"first line not hello", true, `{"type":"prompt","text":"hi"}` + "\n", protocol.CodeHelloRequired, true},
		{"duplicate key hello", true, `{"type":"hello","type":"hello"}` + "\n", protocol.CodeMalformed, true},
		{"unknown hello field", true, `{"type":"hello","admin":true}` + "\n", protocol.CodeMalformed, true},
		{"newer protocol", true, `{"type":"hello","protocol":99}` + "\n", protocol.CodeProtocolVersion, true},
		{"invalid utf8 first", true, "{\"type\":\"hello\",\"client\":\"\xff\"}\n", protocol.CodeInvalidUTF8, true},
		{"line over the cap", true, long, protocol.CodeLineTooLong, true},
		{"second hello", false, `{"type":"hello"}` + "\n", protocol.CodeDuplicateHello, false},
		{"malformed after hello", false, "[1,2\n", protocol.CodeMalformed, false},
		{"invalid utf8 after hello", false, "{\"type\":\"\xc3\"}\n", protocol.CodeInvalidUTF8, false},
		{"unknown type after hello", false, `{"type":"frobnicate"}` + "\n", protocol.CodeUnknownCommand, false},
		{"line over the cap after hello", false, long, protocol.CodeLineTooLong, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := start(t, nil)
			k := h.dial(t)
			if !tt.beforeHello {
				k.hello()
			}
			k.send(tt.line)
			r := k.read()
			if r["record"] != "refusal" || r["code"] != tt.code || r["message"] == "" {
				t.Fatalf("got %v, want refusal %s with a message", r, tt.code)
			}
			if tt.closes && !k.closed() {
				t.Fatal("connection left open; want it closed")
			}
			if !tt.closes && !k.open() {
				t.Fatal("connection no longer serves; want it open")
			}
			// The controller keeps serving other clients.
			h.dial(t).hello()
			var found bool
			for _, e := range h.audit.entries(t) {
				if e["MOSAIC_EVENT"] == "refusal" && e["MOSAIC_REFUSAL"] == tt.code && e["MOSAIC_CONNECTION"] != "" {
					found = true
				}
			}
			if !found {
				t.Fatalf("refusal %s not audited: %v", tt.code, h.audit.entries(t))
			}
		})
	}
}

func TestPeerUIDRefused(t *testing.T) {
	// The kernel reports our real uid; a server owned by another uid must
	// refuse it. (The sandbox test connects as a real second user.)
	h := start(t, func(s *Server) { s.UID = os.Getuid() + 1 })
	k := h.dial(t)
	r := k.read()
	if r["record"] != "refusal" || r["code"] != protocol.CodePeerUID {
		t.Fatalf("got %v, want refusal peer-uid", r)
	}
	if !k.closed() {
		t.Fatal("connection of a foreign uid left open")
	}
}

func TestAuditTrail(t *testing.T) {
	h := start(t, nil)
	k := h.dial(t)
	k.hello()
	k.c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var events []string
		for _, e := range h.audit.entries(t) {
			events = append(events, e["MOSAIC_EVENT"])
			if e["MOSAIC_PEER_UID"] != "" && e["MOSAIC_PEER_UID"] != itoa(os.Getuid()) {
				t.Fatalf("peer uid %s, want %d", e["MOSAIC_PEER_UID"], os.Getuid())
			}
		}
		if strings.Join(events, ",") == "connect,hello,disconnect" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("audit events %v, want connect,hello,disconnect", events)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestTransportBounds: the connection cap refuses too-many-connections
// before close and the operator's connection keeps working; a connection
// silent before its hello is refused hello-timeout; the cap on unfinished
// bytes refuses buffers-full; a huge type is echoed and journaled only as
// a short prefix with its length.
func TestTransportBounds(t *testing.T) {
	t.Run("connection cap", func(t *testing.T) {
		h := start(t, func(s *Server) { s.MaxConns = 2 })
		a, b := h.dial(t), h.dial(t)
		a.hello()
		b.hello()
		c := h.dial(t)
		if r := c.read(); r["record"] != "refusal" || r["code"] != protocol.CodeTooManyConnections {
			t.Fatalf("third connection: %v; want refusal too-many-connections", r)
		}
		if !c.closed() {
			t.Fatal("a refused connection was left open")
		}
		if !a.open() {
			t.Fatal("a connection within the cap stopped serving")
		}
		b.c.Close()
		for i := 0; ; i++ { // b's slot comes back once its handler ended
			k := h.dial(t)
			// While the slot is still taken the server refuses and closes
			// at once, so the hello may meet a closed socket (EPIPE).
			_, err := k.c.Write([]byte(`{"type":"hello"}` + "\n"))
			var r map[string]any
			if err == nil {
				r = k.read()
			}
			if r["record"] == "welcome" {
				break
			} else if i == 100 {
				t.Fatalf("the slot of a closed connection never came back: %v (write: %v)", r, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	t.Run("idle before hello", func(t *testing.T) {
		h := start(t, func(s *Server) { s.IdleTimeout = 200 * time.Millisecond })
		k := h.dial(t)
		k.send(`{"type":"hel`) // a start, then silence
		if r := k.read(); r["record"] != "refusal" || r["code"] != protocol.CodeHelloTimeout {
			t.Fatalf("silent connection: %v; want refusal hello-timeout", r)
		}
		if !k.closed() {
			t.Fatal("a connection that timed out before its hello was left open")
		}
		w := h.dial(t)
		w.hello()
		time.Sleep(400 * time.Millisecond) // after the hello, silence is allowed
		if !w.open() {
			t.Fatal("an idle connection after its hello was closed")
		}
	})
	t.Run("hello deadline", func(t *testing.T) {
		h := start(t, func(s *Server) { s.HelloTimeout = 300 * time.Millisecond; s.IdleTimeout = time.Minute })
		k := h.dial(t)
		stop := make(chan struct{})
		defer close(stop)
		go func() { // a byte now and then, never a whole line
			for {
				select {
				case <-stop:
					return
				case <-time.After(50 * time.Millisecond):
					if _, err := k.c.Write([]byte(" ")); err != nil {
						return
					}
				}
			}
		}()
		if r := k.read(); r["record"] != "refusal" || r["code"] != protocol.CodeHelloTimeout {
			t.Fatalf("trickling connection: %v; want refusal hello-timeout", r)
		}
	})
	t.Run("unfinished bytes", func(t *testing.T) {
		var srv *Server
		h := start(t, func(s *Server) { srv = s; s.MaxLine = 64 << 10; s.MaxBuffered = 100 << 10 })
		a, b := h.dial(t), h.dial(t)
		a.hello()
		b.hello()
		part := strings.Repeat("x", 60<<10)
		a.send(`{"type":"probe","x":"` + part) // holds ~64 KiB of the 100 KiB
		waitReserved(t, srv, int64(len(part)))
		// a's bytes are reserved once the server read them; b's line
		// would then need more than what is left.
		for i := 0; ; i++ {
			k := h.dial(t)
			k.hello()
			k.send(`{"type":"probe","x":"` + part)
			r := k.read()
			if r["record"] == "refusal" && r["code"] == protocol.CodeBuffersFull {
				if !k.closed() {
					t.Fatal("a connection refused buffers-full was left open")
				}
				break
			}
			if i == 3 {
				t.Fatalf("no buffers-full refusal: %v", r)
			}
		}
		a.send("\"}\n") // a's line completes and is answered
		if r := a.read(); r["code"] != protocol.CodeUnknownCommand {
			t.Fatalf("the line within the budget: %v", r)
		}
	})
	t.Run("echo is clipped", func(t *testing.T) {
		h := start(t, func(s *Server) { s.MaxLine = 2 << 20 })
		k := h.dial(t)
		k.hello()
		typ := strings.Repeat("t", 1<<20)
		k.send(`{"type":"` + typ + `"}` + "\n")
		r := k.read()
		msg, _ := r["message"].(string)
		if r["code"] != protocol.CodeUnknownCommand || len(msg) > maxMessage+32 || !strings.Contains(msg, "1048576 bytes") {
			t.Fatalf("refusal of a 1 MiB type: code %v, %d bytes of message %.200q", r["code"], len(msg), msg)
		}
		for _, e := range h.audit.entries(t) {
			for k, v := range e {
				if len(v) > 2*maxMessage {
					t.Fatalf("journal field %s holds %d bytes", k, len(v))
				}
			}
		}
	})
}

// TestJudgeFailsClosed: a process the kernel still names but that cannot
// be read (it made itself non-dumpable, so its namespace links are closed
// to us) and one that exited are engine peers; the test process is not.
func TestJudgeFailsClosed(t *testing.T) {
	judge, err := activation.NewJudge()
	if err != nil {
		t.Fatal(err)
	}
	self, err := activation.ProcessPeer(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	defer self.Close()
	if v := judge.Judge(self); v.Engine {
		t.Fatalf("the test process judged an engine peer: %s", v.Reason)
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	gone, err := activation.ProcessPeer(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	defer gone.Close()
	cmd.Process.Kill()
	cmd.Wait()
	if v := judge.Judge(gone); !v.Engine {
		t.Fatal("an exited peer was judged an outsider; want an engine peer")
	}
}

// waitReserved waits until s holds at least n bytes of unfinished lines:
// the connection that sent them has been read, so a connection dialled
// after cannot take the budget first on a loaded machine.
func waitReserved(t *testing.T, s *Server, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		b := s.lines
		s.mu.Unlock()
		if b != nil && b.inUse() >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not reserve %d bytes of an unfinished line within 10s", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
