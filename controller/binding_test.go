package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	mclient "github.com/mosaic-agents/mosaic/client"
	"github.com/mosaic-agents/mosaic/scopes"
)

// The binding follows the welcome on every connection, before anything
// else, so a one-shot client can address a command without observing.
func TestBindingRightAfterWelcome(t *testing.T) {
	r := newRig(t, plainScript, nil)
	r.waitBinding("active")
	k := r.dial()
	first := k.next()
	if first["record"] != "binding" || first["state"] != "active" || first["execution"] != r.execution() ||
		first["generation"] != r.generation() || first["admission"] != "open" {
		t.Fatalf("first record after the welcome: %v; want the active binding", first)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := mclient.Dial(ctx, r.sock, mclient.Options{Name: "one-shot"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.WaitBound(ctx)
	if err != nil || s.Execution != r.execution() || s.Generation != int64(r.generation()) {
		t.Fatalf("WaitBound = %+v, %v", s, err)
	}
	// No observe: the binding alone addresses a takeover and a prompt.
	if _, err := c.Takeover(ctx); err != nil {
		t.Fatal(err)
	}
	if rc, err := c.Prompt(ctx, "one shot"); err != nil || rc.State != "acknowledged" {
		t.Fatalf("Prompt = %+v, %v", rc, err)
	}
}

// next returns the next record on k, whatever it is, failing after a bound.
func (k *peer) next() map[string]any {
	k.t.Helper()
	select {
	case m, ok := <-k.recs:
		if !ok {
			k.t.Fatal("connection closed while waiting")
		}
		return m
	case <-time.After(30 * time.Second):
		k.t.Fatal("no record within the bound")
	}
	return nil
}

// TestBindingFollowsTheTurn: an observer hears the binding go busy once a
// queued prompt is acknowledged and idle again once its run settled,
// without asking: attach and the web page show engineState from it.
func TestBindingFollowsTheTurn(t *testing.T) {
	r := newRig(t, plainScript, nil)
	ctl, gen := r.queuedCtl()
	obs := r.dial()
	obs.must(map[string]any{"type": "observe", "request": newID("o-")}, "observed")
	rc := ctl.answered(map[string]any{"type": "prompt", "request": newID("p-"), "generation": gen, "text": "hello"})
	if rc["state"] != "acknowledged" {
		t.Fatalf("receipt %v; want acknowledged", rc)
	}
	for _, want := range []string{"busy", "idle"} {
		obs.await(func(m map[string]any) bool { return m["record"] == "binding" && m["engineState"] == want })
	}
}

// TestBindingSaysUnconfined: an engine launched without confinement is
// named so in every binding from its launch on, and in the launch's
// journal entry, not first in the stop that ends uncertain for it; a
// confined one is not.
func TestBindingSaysUnconfined(t *testing.T) {
	for _, tc := range []struct {
		name       string
		unconfined bool
	}{{"confined", false}, {"unconfined", true}} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, plainScript, func(cfg *Config) {
				if tc.unconfined {
					mgr := scopes.NewManager(scopes.Config{NoConfinement: true})
					t.Cleanup(mgr.Close)
					cfg.Scopes = mgr
				}
			})
			b := r.waitBinding("active")
			why, _ := b["unconfined"].(string)
			logged := false
			for _, e := range r.audit.entries(t) {
				if e["MOSAIC_EVENT"] == "launch" && e["MOSAIC_UNCONFINED"] != "" && strings.Contains(e["MESSAGE"], "UNCONFINED") {
					logged = true
				}
			}
			switch {
			case tc.unconfined && (!strings.Contains(why, "turned off") || !logged):
				t.Fatalf("binding %v, launch journaled UNCONFINED %v; want the binding to say why (confinement turned off) and the launch entry to say so", b, logged)
			case !tc.unconfined && (why != "" || logged):
				t.Fatalf("a confined engine's binding says unconfined %q (journaled %v)", why, logged)
			}
		})
	}
}
