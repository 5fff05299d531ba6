package fakepi

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
)

// controlRequest is one line a test sends on the control socket.
type controlRequest struct {
	Op    string `json:"op"` // arm, disarm, release
	Point string `json:"point"`
	ID    int64  `json:"id"`
}

// controlMessage is one line the fake sends: an ack of a request, or a
// report that it paused at a point.
type controlMessage struct {
	Ack    *int64         `json:"ack,omitempty"`
	Error  string         `json:"error,omitempty"`
	Paused string         `json:"paused,omitempty"`
	Detail map[string]any `json:"detail,omitempty"`
}

// controlServer is the fake's side of FAKEPI_CONTROL.
type controlServer struct {
	ln net.Listener

	mu     sync.Mutex
	armed  map[string]int
	held   map[string][]chan struct{}
	conns  map[net.Conn]*sync.Mutex
	closed bool
}

func listenControl(path string) (*controlServer, error) {
	_ = os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	c := &controlServer{ln: ln, armed: map[string]int{}, held: map[string][]chan struct{}{}, conns: map[net.Conn]*sync.Mutex{}}
	go c.accept()
	return c, nil
}

func (c *controlServer) accept() {
	for {
		conn, err := c.ln.Accept()
		if err != nil {
			return
		}
		c.mu.Lock()
		c.conns[conn] = &sync.Mutex{}
		c.mu.Unlock()
		go c.serve(conn)
	}
}

func (c *controlServer) send(conn net.Conn, wmu *sync.Mutex, m controlMessage) {
	b, err := json.Marshal(m)
	if err != nil {
		return
	}
	wmu.Lock()
	defer wmu.Unlock()
	_, _ = conn.Write(append(b, '\n'))
}

func (c *controlServer) serve(conn net.Conn) {
	defer func() {
		c.mu.Lock()
		delete(c.conns, conn)
		c.mu.Unlock()
		_ = conn.Close()
	}()
	c.mu.Lock()
	wmu := c.conns[conn]
	c.mu.Unlock()
	sc := bufio.NewScanner(conn)
	for sc.Scan() {
		var r controlRequest
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			c.send(conn, wmu, controlMessage{Error: "bad request: " + err.Error()})
			continue
		}
		id := r.ID
		if err := c.do(r); err != nil {
			c.send(conn, wmu, controlMessage{Ack: &id, Error: err.Error()})
			continue
		}
		c.send(conn, wmu, controlMessage{Ack: &id})
	}
}

func (c *controlServer) do(r controlRequest) error {
	if !knownPoint(r.Point) {
		return fmt.Errorf("unknown pause point %q", r.Point)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch r.Op {
	case "arm":
		c.armed[r.Point]++
	case "disarm":
		delete(c.armed, r.Point)
	case "release":
		q := c.held[r.Point]
		if len(q) == 0 {
			return errors.New("not paused at " + r.Point)
		}
		close(q[0])
		c.held[r.Point] = q[1:]
	default:
		return fmt.Errorf("unknown op %q", r.Op)
	}
	return nil
}

// pause blocks at point when a test armed it (each arm holds one pass).
// A nil server never pauses.
func (c *controlServer) pause(point string, detail map[string]any) {
	if c == nil {
		return
	}
	c.mu.Lock()
	if c.closed || c.armed[point] == 0 {
		c.mu.Unlock()
		return
	}
	c.armed[point]--
	ch := make(chan struct{})
	c.held[point] = append(c.held[point], ch)
	conns := make(map[net.Conn]*sync.Mutex, len(c.conns))
	for k, v := range c.conns {
		conns[k] = v
	}
	c.mu.Unlock()
	for conn, wmu := range conns {
		c.send(conn, wmu, controlMessage{Paused: point, Detail: detail})
	}
	<-ch
}

// close releases every held pause and stops listening.
func (c *controlServer) close() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.closed = true
	for p, q := range c.held {
		for _, ch := range q {
			close(ch)
		}
		delete(c.held, p)
	}
	c.mu.Unlock()
	_ = c.ln.Close()
}
