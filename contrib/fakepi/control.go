package fakepi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// Paused is the fake's report that it stopped at a pause point.
type Paused struct {
	Point  string
	Detail map[string]any
}

// Control is a test's handle on a running fake's pause points
// (FAKEPI_CONTROL). Arm a point before sending the stdin line that reaches
// it; Wait for the fake to report it paused; do what must land at that exact
// step; then Release it.
type Control struct {
	conn net.Conn

	wmu    sync.Mutex
	mu     sync.Mutex
	nextID int64
	acks   map[int64]chan error
	paused map[string]chan Paused
	err    error
	done   chan struct{}
}

// DialControl connects to the fake's control socket, retrying until the
// fake has created it or ctx ends.
func DialControl(ctx context.Context, path string) (*Control, error) {
	var d net.Dialer
	for {
		conn, err := d.DialContext(ctx, "unix", path)
		if err == nil {
			c := &Control{conn: conn, acks: map[int64]chan error{}, paused: map[string]chan Paused{}, done: make(chan struct{})}
			go c.read()
			return c, nil
		}
		t := time.NewTimer(10 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("fakepi control %s: %w (last error: %v)", path, ctx.Err(), err)
		case <-t.C:
		}
	}
}

func (c *Control) pausedChan(point string) chan Paused {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch, ok := c.paused[point]
	if !ok {
		ch = make(chan Paused, 64)
		c.paused[point] = ch
	}
	return ch
}

func (c *Control) read() {
	defer close(c.done)
	sc := bufio.NewScanner(c.conn)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		var m controlMessage
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			continue
		}
		if m.Ack != nil {
			c.mu.Lock()
			ch := c.acks[*m.Ack]
			delete(c.acks, *m.Ack)
			c.mu.Unlock()
			if ch != nil {
				if m.Error != "" {
					ch <- errors.New(m.Error)
				} else {
					ch <- nil
				}
			}
			continue
		}
		if m.Paused != "" {
			select {
			case c.pausedChan(m.Paused) <- Paused{Point: m.Paused, Detail: m.Detail}:
			default:
			}
		}
	}
	c.mu.Lock()
	c.err = fmt.Errorf("fakepi control connection closed: %v", sc.Err())
	c.mu.Unlock()
}

func (c *Control) request(ctx context.Context, op, point string) error {
	c.mu.Lock()
	c.nextID++
	id := c.nextID
	ch := make(chan error, 1)
	c.acks[id] = ch
	c.mu.Unlock()
	b, err := json.Marshal(controlRequest{Op: op, Point: point, ID: id})
	if err != nil {
		return fmt.Errorf("fakepi control: %w", err)
	}
	c.wmu.Lock()
	_, err = c.conn.Write(append(b, '\n'))
	c.wmu.Unlock()
	if err != nil {
		return fmt.Errorf("fakepi control %s %s: %w", op, point, err)
	}
	select {
	case err := <-ch:
		if err != nil {
			return fmt.Errorf("fakepi control %s %s: %w", op, point, err)
		}
		return nil
	case <-c.done:
		return fmt.Errorf("fakepi control %s %s: connection closed", op, point)
	case <-ctx.Done():
		return fmt.Errorf("fakepi control %s %s: %w", op, point, ctx.Err())
	}
}

// Arm makes the fake pause the next time it reaches point. Arming twice
// pauses at the next two passes.
func (c *Control) Arm(ctx context.Context, point string) error { return c.request(ctx, "arm", point) }

// Disarm cancels any pending arms of point.
func (c *Control) Disarm(ctx context.Context, point string) error {
	return c.request(ctx, "disarm", point)
}

// Release lets the oldest pass held at point continue.
func (c *Control) Release(ctx context.Context, point string) error {
	return c.request(ctx, "release", point)
}

// Wait blocks until the fake reports a pause at point.
func (c *Control) Wait(ctx context.Context, point string) (Paused, error) {
	select {
	case p := <-c.pausedChan(point):
		return p, nil
	case <-c.done:
		return Paused{}, fmt.Errorf("fakepi control: connection closed while waiting for %s", point)
	case <-ctx.Done():
		return Paused{}, fmt.Errorf("fakepi control: waiting for %s: %w", point, ctx.Err())
	}
}

// Close drops the connection; the fake keeps running and stops pausing
// for this client only when no pause is held.
func (c *Control) Close() error {
	if err := c.conn.Close(); err != nil {
		return fmt.Errorf("fakepi control close: %w", err)
	}
	return nil
}
