package controller

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/protocol"
)

// TestEngineOutputLostMakesUncertain: an engine that writes large events
// while the pump is held back fills the adapter's byte-bounded queue; the
// events past it are lost, an unavailable output-lost event says where,
// and the binding turns uncertain with admission closed, as for a line
// lost to framing: the controller never goes on as if it saw everything.
func TestEngineOutputLostMakesUncertain(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	hold := func(d engine.Driver) {
		once.Do(func() {
			dr, ok := d.(interface{ Dropped() uint64 })
			if !ok {
				t.Errorf("the driver %T does not count what it dropped", d)
				return
			}
			for deadline := time.Now().Add(20 * time.Second); dr.Dropped() == 0 && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
	r := newRigAt(t, dir, `{"turns":[{"bulk":8388608,"chunkDelayMs":1}]}`,
		func(cfg *Config) { cfg.EngineMaxQueued = 1 << 20 },
		func(c *Controller) { c.test.pumpEvent = hold })
	r.waitBinding("active")
	k := r.dial()
	k.must(map[string]any{"type": "observe", "request": newID("o-")}, "observed")
	gen := r.takeover(k)
	k.must(map[string]any{"type": "prompt", "request": newID("p-"), "generation": gen, "text": "write a lot"}, "receipt")

	lost := k.await(func(m map[string]any) bool { return m["record"] == "event" && m["kind"] == "unavailable" })
	if n, _ := lost["dropped"].(float64); lost["reason"] != protocol.ReasonOutputLost || n < 1 {
		t.Fatalf("8 MiB streamed past a held pump and a 1 MiB queue gave %v, want reason %s counting what was dropped", lost, protocol.ReasonOutputLost)
	}
	b := k.await(func(m map[string]any) bool { return m["record"] == "binding" && m["state"] == "uncertain" })
	if reason, _ := b["admissionReason"].(string); b["admission"] != "closed" || !strings.Contains(reason, protocol.ReasonOutputLost) {
		t.Fatalf("binding after lost output: %v", b)
	}
	// The journal entry says how many events the hole holds.
	dropped := int64(lost["dropped"].(float64))
	want := fmt.Sprintf("at event %d, %d engine event(s) dropped", int64(lost["seq"].(float64)), dropped)
	for _, e := range r.audit.entries(t) {
		if strings.Contains(e["MESSAGE"], want) && e["MOSAIC_DROPPED"] == fmt.Sprint(dropped) {
			return
		}
	}
	t.Fatalf("no journal entry says %q with MOSAIC_DROPPED", want)
}
