package scopes

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"
)

// ErrNoUserManager means no systemd user manager answered on the user bus.
// The error text carries a hint on how to get one.
var ErrNoUserManager = errors.New("no systemd user manager on the user bus")

const userBusHint = "the systemd user manager is reached over the user D-Bus: install dbus-user-session " +
	"(Debian/Ubuntu) so $XDG_RUNTIME_DIR/bus exists, check that `systemctl --user status` answers, " +
	"and for a user without a login session run `loginctl enable-linger $USER`"

// bus is the one lazily created connection to the user manager, redialled
// after dbus.ErrClosed (the user manager can be restarted or re-executed
// under us), as in opencontainers/cgroups systemd/dbus.go.
type bus struct {
	addr string // "" = from the environment

	mu   sync.Mutex
	conn *sddbus.Conn
}

// address returns the user bus address: the configured one, else
// $DBUS_SESSION_BUS_ADDRESS, else unix:path=$XDG_RUNTIME_DIR/bus.
func (b *bus) address() (string, error) {
	if b.addr != "" {
		return b.addr, nil
	}
	if a := os.Getenv("DBUS_SESSION_BUS_ADDRESS"); a != "" {
		return a, nil
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return "unix:path=" + filepath.Join(d, "bus"), nil
	}
	return "", fmt.Errorf("%w: neither DBUS_SESSION_BUS_ADDRESS nor XDG_RUNTIME_DIR is set; %s", ErrNoUserManager, userBusHint)
}

func (b *bus) dial() (*sddbus.Conn, error) {
	addr, err := b.address()
	if err != nil {
		return nil, err
	}
	uid := strconv.Itoa(os.Getuid())
	c, err := sddbus.NewConnection(func() (*dbus.Conn, error) {
		// No dbus.WithContext: it would close the connection when the
		// caller's context ends, and this one outlives every call.
		conn, err := dbus.Dial(addr)
		if err != nil {
			return nil, fmt.Errorf("dial user bus %q: %w", addr, err)
		}
		if err := conn.Auth([]dbus.Auth{dbus.AuthExternal(uid)}); err != nil {
			conn.Close()
			return nil, fmt.Errorf("authenticate on user bus %q as uid %s: %w", addr, uid, err)
		}
		if err := conn.Hello(); err != nil {
			conn.Close()
			return nil, fmt.Errorf("hello on user bus %q: %w", addr, err)
		}
		return conn, nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w; %s", ErrNoUserManager, err, userBusHint)
	}
	// The bus may answer while no user manager owns org.freedesktop.systemd1.
	if _, err := c.GetManagerProperty("Version"); err != nil {
		c.Close()
		return nil, fmt.Errorf("%w: user bus %q answers but systemd does not: %w; %s", ErrNoUserManager, addr, err, userBusHint)
	}
	return c, nil
}

func (b *bus) get(ctx context.Context) (*sddbus.Conn, error) {
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

// get returns the connection, dialling it on first use (the context is
// not used: the connection outlives the call).
//
// reset drops c if it is still the current connection.
func (b *bus) reset(c *sddbus.Conn) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.conn == c {
		b.conn.Close()
		b.conn = nil
	}
}

func (b *bus) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.conn != nil {
		b.conn.Close()
		b.conn = nil
	}
}

// do runs op on the connection, redialling once if the connection turned
// out to be closed.
func (b *bus) do(ctx context.Context, op func(*sddbus.Conn) error) error {
	for attempt := 0; ; attempt++ {
		c, err := b.get(ctx)
		if err != nil {
			return err
		}
		err = op(c)
		if err == nil || attempt > 0 || !(errors.Is(err, dbus.ErrClosed) || !c.Connected()) {
			return err
		}
		b.reset(c)
	}
}

func isDBusError(err error, name string) bool {
	var derr dbus.Error
	if errors.As(err, &derr) {
		return derr.Name == name
	}
	var pderr *dbus.Error
	if errors.As(err, &pderr) {
		return pderr.Name == name
	}
	return false
}

func isUnitExists(err error) bool {
	return isDBusError(err, "org.freedesktop.systemd1.UnitExists")
}

// UnitState is what a stop reads from the unit.
type UnitState struct {
	LoadState    string
	ActiveState  string
	SubState     string
	Result       string
	InvocationID string // 32 lowercase hex, "" if the unit has none (not loaded)
}

// inactive reports whether the unit is inactive or failed, including a
// transient unit already garbage-collected (loaded again as not-found).
func (s UnitState) inactive() bool {
	return s.ActiveState == "inactive" || s.ActiveState == "failed"
}

func (b *bus) unitState(ctx context.Context, unit string) (UnitState, error) {
	var st UnitState
	err := b.do(ctx, func(c *sddbus.Conn) error {
		props, err := c.GetUnitPropertiesContext(ctx, unit)
		if err != nil {
			return err
		}
		st.LoadState, _ = props["LoadState"].(string)
		st.ActiveState, _ = props["ActiveState"].(string)
		st.SubState, _ = props["SubState"].(string)
		if id, ok := props["InvocationID"].([]byte); ok && len(id) > 0 {
			st.InvocationID = hex.EncodeToString(id)
		}
		if st.LoadState == "not-found" {
			return nil
		}
		p, err := c.GetUnitTypePropertyContext(ctx, unit, "Scope", "Result")
		if err != nil {
			return err
		}
		st.Result, _ = p.Value.Value().(string)
		return nil
	})
	return st, err
}

func (b *bus) controlGroup(ctx context.Context, unit string) (string, error) {
	var cg string
	err := b.do(ctx, func(c *sddbus.Conn) error {
		p, err := c.GetUnitTypePropertyContext(ctx, unit, "Scope", "ControlGroup")
		if err != nil {
			return err
		}
		s, ok := p.Value.Value().(string)
		if !ok {
			return fmt.Errorf("ControlGroup of %s: unexpected %s", unit, p.Value.Signature())
		}
		cg = s
		return nil
	})
	return cg, err
}

func (b *bus) resetFailed(ctx context.Context, unit string) error {
	return b.do(ctx, func(c *sddbus.Conn) error { return c.ResetFailedUnitContext(ctx, unit) })
}
