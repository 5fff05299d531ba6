package scopes

import (
	"context"
	"testing"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
)

// unitRefs is the bus names holding a reference on unit (its Refs
// property) and its load state ("not-found" once collected).
func unitRefs(t *testing.T, m *Manager, unit string) ([]string, string) {
	t.Helper()
	var (
		refs []string
		load string
	)
	err := m.bus.do(context.Background(), func(c *sddbus.Conn) error {
		p, err := c.GetUnitPropertyContext(context.Background(), unit, "Refs")
		if err != nil {
			return err
		}
		refs, _ = p.Value.Value().([]string)
		l, err := c.GetUnitPropertyContext(context.Background(), unit, "LoadState")
		if err != nil {
			return err
		}
		load, _ = l.Value.Value().(string)
		return nil
	})
	if err != nil {
		t.Fatalf("read %s: %v", unit, err)
	}
	return refs, load
}

// waitCollected waits until the manager has collected unit: no reference
// is left on it and it is no longer loaded.
func waitCollected(t *testing.T, m *Manager, unit, after string) {
	t.Helper()
	var (
		refs []string
		load string
	)
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if refs, load = unitRefs(t, m, unit); len(refs) == 0 && load == "not-found" {
			return
		}
	}
	t.Fatalf("after %s: unit %s still has refs %q, load state %s", after, unit, refs, load)
}

// TestHoldUnitDuringStop: a stop holds a reference on the unit on the
// user bus (RefUnit, hold.go) when the anchor dies, so the manager
// answers the release's question before it collects the unit, and lets it
// go afterwards: the manager collects the unit. A TERM phase alone keeps
// the hold until the handle is closed or abandoned.
func TestHoldUnitDuringStop(t *testing.T) {
	for _, tc := range []struct {
		name string
		stop func(t *testing.T, e *engine)
	}{
		{"a whole stop", func(t *testing.T, e *engine) {
			if res := e.Stop(ctxT(t), StopOptions{Stop: "s1", Grace: 5 * time.Second}); res.Outcome != Stopped {
				t.Fatalf("stop: %s (%s)", res.Outcome, res.Reason)
			}
		}},
		{"the kill phase alone", func(t *testing.T, e *engine) {
			if res := e.Kill(ctxT(t), StopOptions{Stop: "s1"}); res.Outcome != Stopped {
				t.Fatalf("kill: %s (%s)", res.Outcome, res.Reason)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := testManager(t)
			e := launchEngine(t, m, `echo "ready 1"; exec sleep 300`)
			e.expect(t, "ready")
			if refs, _ := unitRefs(t, m, e.Cohort.Unit); len(refs) != 0 {
				t.Fatalf("a running engine's unit is referenced before any stop: %q", refs)
			}
			var atRelease []string
			m.faults.refuseRelease = func() error {
				// The hold's answer may still be out: wait for it a little.
				for end := time.Now().Add(2 * time.Second); len(atRelease) == 0 && time.Now().Before(end); time.Sleep(time.Millisecond) {
					atRelease, _ = unitRefs(t, m, e.Cohort.Unit)
				}
				return nil
			}
			tc.stop(t, e)
			if len(atRelease) != 1 {
				t.Fatalf("when the anchor was killed the unit had references %q, want this process's one", atRelease)
			}
			waitCollected(t, m, e.Cohort.Unit, tc.name)
		})
	}
	for _, tc := range []struct {
		name string
		end  func(e *engine)
	}{
		{"a TERM phase, then the handle closed", func(e *engine) { e.Close() }},
		{"a TERM phase, then the handle abandoned", func(e *engine) { e.Abandon(context.Background()) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := testManager(t)
			// The engine ignores SIGTERM: the TERM phase ends at its grace.
			e := launchEngine(t, m, `trap "" TERM; echo "ready 1"; while :; do sleep 1; done`)
			e.expect(t, "ready")
			if res := e.Term(ctxT(t), 50*time.Millisecond); res.Emptied {
				t.Fatalf("the TERM phase emptied the cgroup of an engine that ignores SIGTERM")
			}
			var refs []string
			for end := time.Now().Add(5 * time.Second); len(refs) == 0 && time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
				refs, _ = unitRefs(t, m, e.Cohort.Unit)
			}
			if len(refs) != 1 {
				t.Fatalf("after the TERM phase the unit has references %q, want this process's one", refs)
			}
			tc.end(e)
			// Abandoned, the unit ends; closed, it runs on, no longer held.
			for end := time.Now().Add(5 * time.Second); len(refs) != 0 && time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
				refs, _ = unitRefs(t, m, e.Cohort.Unit)
			}
			if len(refs) != 0 {
				t.Fatalf("after %s the unit still has references %q", tc.name, refs)
			}
			e.Abandon(context.Background())
			waitCollected(t, m, e.Cohort.Unit, tc.name)
		})
	}
}

// TestHoldNoUnitGone: a stop of a scope systemd already collected takes no
// reference: the manager refuses RefUnit for a unit it does not have
// loaded, where a Ref on the unit's object path takes one on the
// not-found stub that path conjures and pins it (the user manager then
// spent its loop reloading the stub, at 90% CPU, answering nothing).
func TestHoldNoUnitGone(t *testing.T) {
	m := testManager(t)
	e := launchEngine(t, m, `echo "ready 1"; exec sleep 300`)
	e.expect(t, "ready")
	systemctl(t, "kill", "--signal=KILL", e.Cohort.Unit)
	waitUnitGone(t, m, e.Cohort)
	// The TERM phase holds nothing it could take; give the hold's
	// answer time to come.
	e.Term(ctxT(t), 10*time.Millisecond)
	time.Sleep(300 * time.Millisecond)
	if refs, load := unitRefs(t, m, e.Cohort.Unit); len(refs) != 0 {
		t.Fatalf("after a TERM phase of a collected unit, the manager holds %s (%s) for %q", e.Cohort.Unit, load, refs)
	}
}
