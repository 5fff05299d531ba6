package userbus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/godbus/dbus/v5"
)

// Holder keeps units loaded while this process holds them
// (org.freedesktop.systemd1.Manager.RefUnit). The user manager collects an
// inactive transient unit at once, in the same turn of its loop that
// ends the unit and before it reads the next question, so a caller
// waiting to read a unit inactive waits for the collection too. A
// reference defers that until it is let go.
//
// The manager ties a reference to the holder's name on the bus, which a
// connection to its private socket does not have (it refuses Ref there),
// so a Holder has a bus connection of its own, dialled on first use. The
// manager drops a connection's references when it closes: a process that
// dies holds nothing.
type Holder struct {
	addr    string        // "" = from the environment (busAddress)
	timeout time.Duration // each wait for the bus or the manager

	mu     sync.Mutex
	conn   *dbus.Conn
	closed bool
}

// NewHolder returns a Holder on the user bus at addr; "" means
// $DBUS_SESSION_BUS_ADDRESS, else unix:path=$XDG_RUNTIME_DIR/bus (never
// the manager's private socket).
func NewHolder(addr string) *Holder { return &Holder{addr: addr, timeout: answerTimeout} }

// Hold references unit and returns what lets it go: release tells the
// manager on the connection the reference was taken on, so a reference
// lost with a connection is never released on the next.
func (h *Holder) Hold(ctx context.Context, unit string) (release func(context.Context) error, err error) {
	conn, err := h.connect()
	if err != nil {
		return nil, err
	}
	if err := h.call(ctx, conn, unit, "Ref"); err != nil {
		if !isReply(err) {
			// No answer (the wait's bound, the connection lost): the
			// manager may take the reference yet, and no release is
			// returned for it. Closing the connection lets go of every
			// reference it holds: other stops' holds then end early, and
			// their units are collected as without one.
			h.drop(conn)
		}
		return nil, err
	}
	return func(ctx context.Context) error { return h.call(ctx, conn, unit, "Unref") }, nil
}

// isReply says whether err is the manager's own error reply (the unit
// not loaded, access denied), after which it holds nothing.
func isReply(err error) bool {
	_, ok := replyName(err)
	return ok
}

// Close closes the connection, which lets every unit go, and refuses
// later holds.
func (h *Holder) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	if h.conn != nil {
		h.conn.Close()
		h.conn = nil
	}
}

// connect returns the connection, dialling it if there is none. The dial
// (bounded by the answer timeout) runs without the lock, so a Close is
// never held up by a bus that does not answer; a connection dialled after
// a Close is closed again, and of two dialled at once one is kept.
func (h *Holder) connect() (*dbus.Conn, error) {
	h.mu.Lock()
	conn, closed := h.conn, h.closed
	h.mu.Unlock()
	if closed {
		return nil, errHolderClosed
	}
	if conn != nil && conn.Connected() {
		return conn, nil
	}
	addr, err := busAddress(h.addr)
	if err != nil {
		return nil, err
	}
	if conn, err = dialRaw(addr, true, h.timeout); err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.closed:
		conn.Close()
		return nil, errHolderClosed
	case h.conn != nil && h.conn.Connected():
		conn.Close()
		return h.conn, nil
	}
	h.conn = conn
	return conn, nil
}

// drop closes conn, and forgets it if it is still the Holder's.
func (h *Holder) drop(conn *dbus.Conn) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.conn == conn {
		h.conn = nil
	}
	conn.Close()
}

var errHolderClosed = errors.New("unit holder closed")

// call calls org.freedesktop.systemd1.Manager.<method>Unit on unit,
// bounded by the Holder's answer timeout whatever ctx allows. The
// manager's own RefUnit refuses a unit it does not have loaded; the unit
// object's Ref would take a reference on the not-found stub its path
// conjures (a stop of a scope systemd already removed), which pinned the
// stub, and the manager then spent its loop reloading it (systemd 252:
// the user manager at 90% CPU, answering nothing, until the holder went
// away).
func (h *Holder) call(ctx context.Context, conn *dbus.Conn, unit, method string) error {
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	obj := conn.Object("org.freedesktop.systemd1", "/org/freedesktop/systemd1")
	if err := obj.CallWithContext(ctx, "org.freedesktop.systemd1.Manager."+method+"Unit", 0, unit).Err; err != nil {
		return fmt.Errorf("%sUnit %s: %w", method, unit, err)
	}
	return nil
}
