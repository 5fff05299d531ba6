package controller

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/scopes"
)

// TestReplacedLimitsApplyAtNextLaunch: `conv add --replace` rewrites the
// conversation file while the controller runs; the running engine keeps
// its limits, and launch after recover starts the new scope with the new
// ones, read back from systemd. Before, the controller kept the settings
// it started with, so recover launched with the old limits.
func TestReplacedLimitsApplyAtNextLaunch(t *testing.T) {
	var store *conversations.Store
	first := conversations.Limits{MemoryMax: conversations.MemoryMax{Bytes: 1 << 30}, TasksMax: conversations.TasksMax{Count: 512},
		CPUQuota: conversations.CPUQuota{Share: 20000}}
	second := conversations.Limits{MemoryMax: conversations.MemoryMax{Bytes: 1536 << 20}, TasksMax: conversations.TasksMax{Count: 300},
		CPUQuota: conversations.CPUQuota{Share: 5000}}
	r := newRig(t, plainScript, func(c *Config) {
		store = &conversations.Store{Dir: filepath.Join(filepath.Dir(c.Conversation.Project), "conversations")}
		c.Conversation.Limits = first // what the controller read at its start
		cv := *c.Conversation
		if err := store.Save(&cv); err != nil {
			t.Fatal(err)
		}
		c.Load = func() (*conversations.Conversation, error) { return store.Load(cv.ID) }
	})
	r.waitBinding("active")
	checkApplied(t, r, first)

	k := r.dial()
	k.must(map[string]any{"type": "observe", "request": "o"}, "observed")
	gen := r.takeover(k)
	cv, err := store.Load(r.cfg.Conversation.ID)
	if err != nil {
		t.Fatal(err)
	}
	cv.Limits = second
	if err := store.Save(cv); err != nil {
		t.Fatal(err)
	}
	// The running engine keeps what it was launched with.
	checkApplied(t, r, first)

	cf := k.confirm("force-stop", gen)
	if rc := k.must(map[string]any{"type": "force-stop", "request": "f1", "generation": gen, "confirmation": cf}, "receipt"); rc["state"] != "stopped" {
		t.Fatalf("force stop %v", rc)
	}
	el := k.must(map[string]any{"type": "recover", "request": "rv", "generation": gen, "confirmation": k.confirm("recover", gen)}, "eligibility")
	if lr := k.must(map[string]any{"type": "launch", "request": "l1", "generation": gen, "eligibility": el["id"]}, "receipt"); lr["state"] != "launched" {
		t.Fatalf("launch %v", lr)
	}
	r.waitBinding("active")
	checkApplied(t, r, second)
	var limits []string
	for _, e := range r.audit.entries(t) {
		if e["MOSAIC_LIMITS"] != "" {
			limits = append(limits, e["MOSAIC_LIMITS"])
		}
	}
	if got := strings.Join(limits, " | "); got != "MemoryMax=1G TasksMax=512 CPUQuota=200% | MemoryMax=1536M TasksMax=300 CPUQuota=50%" {
		t.Errorf("the audit records launch limits %q", got)
	}
}

// checkApplied reads the current execution's scope over D-Bus and
// compares it with l.
func checkApplied(t *testing.T, r *rig, l conversations.Limits) {
	t.Helper()
	r.ctrl.mu.Lock()
	unit := r.ctrl.st.exec.handle.Cohort.Unit
	r.ctrl.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := r.cfg.Scopes.Applied(ctx, unit)
	if err != nil {
		t.Fatal(err)
	}
	want := scopes.Applied{Unit: unit, MemoryMax: l.MemoryMax.Bytes, TasksMax: l.TasksMax.Count, CPUQuotaPerSecUSec: l.CPUQuota.PerSecUSec()}
	if a != want {
		t.Fatalf("scope %s has %+v, want %+v", unit, a, want)
	}
}
