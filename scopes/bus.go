package scopes

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"
	"github.com/mosaic-agents/mosaic/internal/userbus"
)

// ErrNoUserManager means no systemd user manager answered on the user bus.
// The error text carries a hint on how to get one.
var ErrNoUserManager = userbus.ErrNoUserManager

// bus is a Manager's connection to the user manager: the process's shared
// one (userbus.Default) unless Config.BusAddress names another, which the
// Manager then owns and closes.
type bus struct {
	*userbus.Bus
	owned bool
}

func newBus(addr string) bus {
	if addr == "" {
		return bus{Bus: userbus.Default()}
	}
	return bus{Bus: userbus.New(addr), owned: true}
}

func (b bus) do(ctx context.Context, op func(*sddbus.Conn) error) error { return b.Do(ctx, op) }

func (b bus) get(ctx context.Context) (*sddbus.Conn, error) { return b.Conn(ctx) }

// close closes an owned connection; the shared one outlives the Manager.
func (b bus) close() {
	if b.owned {
		b.Close()
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

func (b bus) controlGroup(ctx context.Context, unit string) (string, error) {
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

func (b bus) resetFailed(ctx context.Context, unit string) error {
	return b.do(ctx, func(c *sddbus.Conn) error { return c.ResetFailedUnitContext(ctx, unit) })
}

// unitState reads the unit's state in one round trip to the manager: the
// Scope's Result is asked for while GetAll of the Unit interface is in
// flight, not after its answer. The Unit's properties come from one
// message, so they are one moment's (the invocation id with its active
// state), and the Result from another, which may be answered first: a
// failed state with a success Result is read again. A stop asks this on
// its critical path up to three times. A unit not loaded (collected, read
// back as not-found) has no Result; its error, if any, is ignored, and
// Result stays "".
func (b bus) unitState(ctx context.Context, unit string) (UnitState, error) {
	var st UnitState
	err := b.do(ctx, func(c *sddbus.Conn) error {
		type answer struct {
			result string
			err    error
		}
		result := make(chan answer, 1)
		go func() {
			r, err := scopeResult(ctx, c, unit)
			result <- answer{r, err}
		}()
		props, err := c.GetUnitPropertiesContext(ctx, unit)
		res := <-result
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
		st.Result, err = res.result, res.err
		if err == nil && st.ActiveState == "failed" && st.Result == "success" {
			// The Result was answered before the failure the state
			// shows: ask again, after it.
			st.Result, err = scopeResult(ctx, c, unit)
		}
		return err
	})
	return st, err
}

// scopeResult reads the scope's Result property.
func scopeResult(ctx context.Context, c *sddbus.Conn, unit string) (string, error) {
	p, err := c.GetUnitTypePropertyContext(ctx, unit, "Scope", "Result")
	if err != nil {
		return "", err
	}
	r, _ := p.Value.Value().(string)
	return r, nil
}

// invocationID reads the unit's InvocationID alone (32 lowercase hex, ""
// if it has none): one Get, where unitState's GetAll carries every
// property of the unit (about 300) and asks for the Result as well.
func (b bus) invocationID(ctx context.Context, unit string) (string, error) {
	var id string
	err := b.do(ctx, func(c *sddbus.Conn) error {
		p, err := c.GetUnitPropertyContext(ctx, unit, "InvocationID")
		if err != nil {
			return err
		}
		raw, ok := p.Value.Value().([]byte)
		if !ok {
			return fmt.Errorf("InvocationID of %s: unexpected %s", unit, p.Value.Signature())
		}
		id = hex.EncodeToString(raw)
		return nil
	})
	return id, err
}
