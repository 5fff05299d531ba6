package scopes

import (
	"context"
	"testing"
	"time"
)

// TestAppliedAndEngineScopes: a launched engine's scope is found by its
// conversation (whose '-' are escaped as \x2d in the unit name) and its
// limits read back as launched.
func TestAppliedAndEngineScopes(t *testing.T) {
	m := testManager(t)
	e := launchEngine(t, m, "echo up; exec sleep 300")
	if l := e.line(t); l != "up" {
		t.Fatalf("engine said %q", l)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	units, err := m.EngineScopes(ctx, e.Cohort.Conversation)
	if err != nil || len(units) != 1 || units[0].Name != e.Cohort.Unit {
		t.Fatalf("EngineScopes(%q) = %v, %v; want [%s]", e.Cohort.Conversation, units, err, e.Cohort.Unit)
	}
	if other, err := m.EngineScopes(ctx, e.Cohort.Conversation+"x"); err != nil || len(other) != 0 {
		t.Fatalf("another conversation's scopes: %v, %v", other, err)
	}
	a, err := m.Applied(ctx, e.Cohort.Unit)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Applied{Unit: e.Cohort.Unit, MemoryMax: 1 << 30, TasksMax: 1024, CPUQuotaPerSecUSec: 2000000}); a != want {
		t.Fatalf("Applied = %+v, want %+v", a, want)
	}
}
