// Package userbus is mosaic's one connection to the calling user's systemd
// manager, on its private socket or else over the user D-Bus (dial):
// dialled on first use, redialled after dbus.ErrClosed (the user manager
// can be restarted or re-executed under us), as opencontainers/cgroups
// does in systemd/dbus.go.
//
// Default is the process's connection for the environment's bus, and the
// only global state mosaic keeps: a controller (scopes), the unit verbs
// (units) and mosaicctl status all talk to the same manager, and a
// connection per call costs a dial, an EXTERNAL auth and a Hello each
// time, while a connection per package is three sockets where one does.
// New makes a private one, for an explicit address (tests point one at a
// bus that does not answer). A Holder (hold.go) is a bus connection of its
// own for references on units, which the private socket refuses.
//
// Alternatives weighed: go-systemd's NewUserConnectionContext dials once
// and never redials, and its error carries no hint; keeping the connection
// in scopes and having units take a *scopes.Manager would make the unit
// verbs depend on the engine launcher for a socket.
package userbus

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"

	"github.com/mosaic-agents/mosaic/internal/xdg"
)

// ErrNoUserManager means no systemd user manager answered on the user bus.
// The error text carries a hint on how to get one.
var ErrNoUserManager = errors.New("no systemd user manager on the user bus")

// Hint says how to get a user manager on the user bus.
const Hint = "the systemd user manager is reached over the user D-Bus: install dbus-user-session " +
	"(Debian/Ubuntu) so $XDG_RUNTIME_DIR/bus exists, check that `systemctl --user status` answers, " +
	"and for a user without a login session run `loginctl enable-linger $USER`"

// answerTimeout bounds each step of a dial that waits for the other end
// (authentication, Hello, the manager's Version): sd-bus's default method
// timeout. A manager that accepts and never answers (stuck, or a socket
// someone else bound) must not hold the Bus, whose lock every caller
// waits on, for ever.
const answerTimeout = 25 * time.Second

// Bus is a lazily dialled, reconnecting connection to the user manager.
// It is safe for concurrent use.
type Bus struct {
	addr string // "" = from the environment
	// direct: addr is a manager's private socket, which answers without a
	// bus daemon, so no Hello is said there.
	direct bool
	// timeout is answerTimeout unless a test shortens it.
	timeout time.Duration

	mu   sync.Mutex
	conn *sddbus.Conn
}

// New returns a private Bus on addr; "" means $DBUS_SESSION_BUS_ADDRESS,
// else unix:path=$XDG_RUNTIME_DIR/bus. Nothing is dialled until used.
func New(addr string) *Bus { return &Bus{addr: addr, timeout: answerTimeout} }

// NewDirect returns a private Bus on the private socket of a manager at
// path ($XDG_RUNTIME_DIR/systemd/private of a user's manager). systemd
// accepts a peer there only if it is root or the manager's own uid: this
// is how root asks each user's manager.
func NewDirect(path string) *Bus {
	return &Bus{addr: "unix:path=" + path, direct: true, timeout: answerTimeout}
}

// Default returns the process's Bus for the environment's address.
var Default = sync.OnceValue(func() *Bus { return New("") })

// Do runs op on the connection, dialling it on first use, and redials
// once if the connection turned out to be closed.
func (b *Bus) Do(ctx context.Context, op func(*sddbus.Conn) error) error {
	for attempt := 0; ; attempt++ {
		c, err := b.Conn(ctx)
		if err != nil {
			return err
		}
		err = op(c)
		if err == nil || attempt > 0 || !(errors.Is(err, dbus.ErrClosed) || !c.Connected()) {
			return err
		}
		b.drop(c)
	}
}

// Conn returns the connection, dialling it on first use. The context is
// not used for the dial: the connection outlives the call.
func (b *Bus) Conn(ctx context.Context) (*sddbus.Conn, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.conn != nil {
		return b.conn, nil
	}
	c, err := b.dial()
	if err != nil {
		return nil, err
	}
	b.conn = c
	return c, nil
}

// Close closes the connection; the next use dials again.
func (b *Bus) Close() { b.drop(nil) }

// drop closes the connection if it is c (any connection when c is nil):
// a caller that saw c fail must not close the one another caller has
// already redialled.
func (b *Bus) drop(c *sddbus.Conn) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.conn != nil && (c == nil || b.conn == c) {
		b.conn.Close()
		b.conn = nil
	}
}

// address returns the user bus address: the configured one, else
// $DBUS_SESSION_BUS_ADDRESS, else unix:path=$XDG_RUNTIME_DIR/bus.
func (b *Bus) address() (string, error) { return busAddress(b.addr) }

// busAddress is addr, else the environment's user bus (Bus.address).
func busAddress(addr string) (string, error) {
	if addr != "" {
		return addr, nil
	}
	if a := os.Getenv("DBUS_SESSION_BUS_ADDRESS"); a != "" {
		return a, nil
	}
	if d, err := xdg.RuntimeDir(); err == nil {
		return "unix:path=" + filepath.Join(d, "bus"), nil
	}
	return "", fmt.Errorf("%w: neither DBUS_SESSION_BUS_ADDRESS nor XDG_RUNTIME_DIR is set; %s", ErrNoUserManager, Hint)
}

// dial connects to the user manager. Without an explicit address it
// tries the manager's private socket first ($XDG_RUNTIME_DIR/systemd/
// private, as systemctl --user and systemd-run do): there is no bus
// daemon between, so a call is one hop instead of two, and a launch's
// StartTransientUnit, its job's end and the reads after it each save a
// round trip through dbus-daemon. The private socket sends every signal
// to every connection, which go-systemd's job listener needs and the rest
// ignores. The user bus remains the way when the socket is missing or
// refuses us; an explicit address is only ever that address.
func (b *Bus) dial() (*sddbus.Conn, error) {
	if b.addr == "" {
		if d, err := xdg.RuntimeDir(); err == nil {
			if c, err := connect("unix:path="+filepath.Join(d, "systemd", "private"), false, b.timeout); err == nil {
				return c, nil
			}
		}
	}
	addr, err := b.address()
	if err != nil {
		return nil, err
	}
	return connect(addr, !b.direct, b.timeout)
}

// connect dials addr, authenticates as this uid and, on a bus (hello),
// says Hello; then checks that systemd answers. Each wait for the other
// end is bounded by timeout: the connection is closed under it, which
// ends the wait with an error.
func connect(addr string, hello bool, timeout time.Duration) (*sddbus.Conn, error) {
	// NewConnection dials twice and then, on the second connection, asks
	// the bus for an AddMatch and waits for the answer with no bound of
	// its own: addMatch bounds that wait as the steps below bound theirs.
	var (
		dials    int
		addMatch *time.Timer
	)
	c, err := sddbus.NewConnection(func() (*dbus.Conn, error) {
		conn, err := dialRaw(addr, hello, timeout)
		if err != nil {
			return nil, err
		}
		if dials++; dials == 2 {
			addMatch = time.AfterFunc(timeout, func() { conn.Close() })
		}
		return conn, nil
	})
	if addMatch != nil && !addMatch.Stop() {
		if err == nil {
			c.Close()
		}
		return nil, fmt.Errorf("%w: user bus %q did not answer AddMatch within %v; %s", ErrNoUserManager, addr, timeout, Hint)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w; %s", ErrNoUserManager, err, Hint)
	}
	// The bus may answer while no user manager owns org.freedesktop.systemd1.
	guard := time.AfterFunc(timeout, c.Close)
	_, err = c.GetManagerProperty("Version")
	if !guard.Stop() {
		return nil, fmt.Errorf("%w: user bus %q: systemd did not answer within %v; %s", ErrNoUserManager, addr, timeout, Hint)
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("%w: user bus %q answers but systemd does not: %w; %s", ErrNoUserManager, addr, err, Hint)
	}
	return c, nil
}

// dialRaw dials addr, authenticates as this uid and, on a bus (hello),
// says Hello, each wait for the other end bounded by timeout.
func dialRaw(addr string, hello bool, timeout time.Duration) (*dbus.Conn, error) {
	uid := strconv.Itoa(os.Getuid())
	// No dbus.WithContext: it would close the connection when the
	// caller's context ends, and this one outlives every call.
	conn, err := dbus.Dial(addr)
	if err != nil {
		return nil, fmt.Errorf("dial user bus %q: %w", addr, err)
	}
	guard := time.AfterFunc(timeout, func() { conn.Close() })
	err = conn.Auth([]dbus.Auth{dbus.AuthExternal(uid)})
	if err == nil && hello {
		err = conn.Hello()
	}
	if !guard.Stop() {
		conn.Close()
		return nil, fmt.Errorf("user bus %q did not answer authentication within %v", addr, timeout)
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("authenticate (and say hello) on user bus %q as uid %s: %w", addr, uid, err)
	}
	return conn, nil
}

// IsError reports whether err carries the D-Bus error name (such as
// org.freedesktop.systemd1.NoSuchUnit), by value or by pointer.
func IsError(err error, name string) bool {
	n, ok := replyName(err)
	return ok && n == name
}

// replyName is the name of the D-Bus error reply err carries, by value or
// by pointer; false when err is no reply (a timeout, a closed connection).
func replyName(err error) (string, bool) {
	var derr dbus.Error
	if errors.As(err, &derr) {
		return derr.Name, true
	}
	var pderr *dbus.Error
	if errors.As(err, &pderr) {
		return pderr.Name, true
	}
	return "", false
}
