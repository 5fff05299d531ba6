package controller

import (
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/protocol"
)

// TestEngineStopsReadingStdin: an engine whose stdin reader hangs (the
// fake told to stop reading after one prompt) cannot hold the next
// prompt's write for ever. The write of a prompt larger than the stdin
// socket holds misses its deadline part way: the item ends
// delivery-unknown (never acknowledged), an unavailable stdin-broken
// event and the binding (uncertain, admission closed saying why and the
// way out) tell every client, the journal records the write, later
// commands are refused at once, and force stop still ends the engine.
// Before, the dispatch blocked on the write until the controller closed.
func TestEngineStopsReadingStdin(t *testing.T) {
	const stall = "stop reading after this"
	r := newRig(t, `{"turns":[{"text":["ok"]}]}`, func(cfg *Config) {
		cfg.EngineStdinTimeout = 200 * time.Millisecond
		spec := cfg.Spec
		cfg.Spec = func(cv *conversations.Conversation) (engine.Spec, error) {
			s, err := spec(cv)
			s.Env = append(s.Env, "FAKEPI_STDIN_STALL="+stall)
			return s, err
		}
	})
	k, gen := r.queuedCtl()
	if rc := k.answered(map[string]any{"type": "prompt", "request": newID("p-"), "generation": gen, "text": stall}); rc["state"] != protocol.ReceiptAcknowledged {
		t.Fatalf("the prompt before the stall: %v", rc)
	}
	k.settled()

	// 800 KB, four times what a stdin socket's buffer holds by default
	// (net.core.wmem_default), under the client line cap (1 MiB).
	big := strings.Repeat("\U0001F600", 200000)
	req := newID("p-")
	k.send(map[string]any{"type": "prompt", "request": req, "generation": gen, "text": big})
	// The event and the item's outcome come in either order.
	var rc, ev map[string]any
	k.await(func(m map[string]any) bool {
		switch {
		case m["record"] == "event" && m["kind"] == "unavailable":
			ev = m
		case m["record"] == "receipt" && m["request"] == req && m["state"] != protocol.ReceiptQueued && m["state"] != protocol.ReceiptDispatched:
			rc = m
		}
		return rc != nil && ev != nil
	})
	if reason, _ := rc["reason"].(string); rc["state"] != protocol.ReceiptDeliveryUnknown || !strings.Contains(reason, "did not read its stdin") {
		t.Fatalf("a prompt the engine stopped reading part way: %v, want delivery-unknown saying why", trim(rc))
	}
	if ev["reason"] != protocol.ReasonStdinBroken {
		t.Fatalf("event when the stdin broke: %v, want unavailable %s", ev, protocol.ReasonStdinBroken)
	}
	b := r.waitBinding(protocol.BindingUncertain)
	if reason, _ := b["admissionReason"].(string); b["admission"] != protocol.AdmissionClosed || !strings.Contains(reason, "stopped taking input") || !strings.Contains(reason, "force stop, then recover") {
		t.Fatalf("binding after the stdin broke: %v", b)
	}
	found := false
	for _, e := range r.audit.entries(t) {
		if e["MOSAIC_REASON"] == protocol.ReasonStdinBroken && e["MOSAIC_STATE"] == protocol.BindingUncertain && e["MOSAIC_WRITTEN"] != "" && e["MOSAIC_WRITTEN"] != "0" {
			found = true
		}
	}
	if !found {
		t.Error("no journal entry records the write that broke the engine's stdin")
	}

	k.refused(map[string]any{"type": "prompt", "request": newID("p-"), "generation": gen, "text": "more"}, protocol.CodeFenced)
	k.refused(map[string]any{"type": "interrupt", "request": newID("i-"), "generation": gen}, protocol.CodeFenced)

	fs := k.must(map[string]any{"type": "force-stop", "request": newID("f-"), "generation": gen, "confirmation": k.confirm("force-stop", gen)}, "receipt")
	if fs["state"] != protocol.ReceiptStopped {
		t.Fatalf("force stop of an engine that stopped reading: %v", fs)
	}
}

// trim shortens a record's long strings for a failure message.
func trim(m map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		if s, ok := v.(string); ok && len(s) > 200 {
			v = s[:200] + "…"
		}
		out[k] = v
	}
	return out
}
