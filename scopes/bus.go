package scopes

import (
	"context"
	"encoding/hex"
	"fmt"
	"sync"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
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

func isDBusError(err error, name string) bool { return userbus.IsError(err, name) }

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

// unitState reads the unit's state with three small reads in flight at
// once: the load, active and sub state from the unit's ListUnitsByNames
// entry (one message, so they agree with each other), the InvocationID
// and the Scope's Result, each with a Get. GetAll of the Unit interface,
// which it replaces, carries about 120 properties the manager computes and
// we decode, and cost about four small reads (BenchmarkUnitState). A stop
// asks this on its critical path for the release; whether the path is
// still ours it asks with the invocation alone first (ourInvocation).
//
// The invocation id and the state are then read at different moments, in
// no fixed order, both after the launch. That is all a stop needs of them:
//   - "our invocation has ended" (the release, a removal systemd made):
//     the id read as ours and the state as inactive or failed means the
//     unit's invocation at the state's moment was ours or a later one, and
//     a later one starts only once ours has ended; an id that is another's
//     means the same. An active state says nothing either way and is asked
//     again.
//   - "the path is still ours" (Term, identify): decided by the id read
//     alone, before anything is touched, as before.
//
// A failed state with a success Result is read again (the Result was
// answered before the failure). A unit not loaded (collected, read back
// as not-found) has no Result; its error, if any, is ignored, and Result
// stays "".
func (b bus) unitState(ctx context.Context, unit string) (UnitState, error) {
	var st UnitState
	err := b.do(ctx, func(c *sddbus.Conn) error {
		var (
			wg             sync.WaitGroup
			inv, result    string
			invErr, resErr error
		)
		wg.Go(func() { inv, invErr = unitInvocation(ctx, c, unit) })
		wg.Go(func() { result, resErr = scopeResult(ctx, c, unit) })
		us, err := c.ListUnitsByNamesContext(ctx, []string{unit})
		wg.Wait()
		switch {
		case err != nil:
			return err
		case len(us) != 1:
			return fmt.Errorf("unit %s: the manager listed %d units for it", unit, len(us))
		}
		st = UnitState{LoadState: us[0].LoadState, ActiveState: us[0].ActiveState, SubState: us[0].SubState}
		if st.LoadState == "not-found" {
			return nil
		}
		if invErr != nil {
			return invErr
		}
		st.InvocationID = inv
		st.Result, err = result, resErr
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

// unitInvocation reads the unit's InvocationID (32 lowercase hex, "" if
// it has none).
func unitInvocation(ctx context.Context, c *sddbus.Conn, unit string) (string, error) {
	p, err := c.GetUnitPropertyContext(ctx, unit, "InvocationID")
	if err != nil {
		return "", err
	}
	raw, ok := p.Value.Value().([]byte)
	if !ok {
		return "", fmt.Errorf("InvocationID of %s: unexpected %s", unit, p.Value.Signature())
	}
	return hex.EncodeToString(raw), nil
}

// invocationID reads the unit's InvocationID alone: one Get.
func (b bus) invocationID(ctx context.Context, unit string) (string, error) {
	var id string
	err := b.do(ctx, func(c *sddbus.Conn) (err error) {
		id, err = unitInvocation(ctx, c, unit)
		return err
	})
	return id, err
}
