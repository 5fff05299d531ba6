package controller

import (
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/protocol"
)

// TestNativeDialogShownDisabled: an extension dialog the engine opens is
// pushed to observers as a disabled notice (and an unavailable event), an
// approval from the controller refuses unsupported-capability, nothing is
// ever written to the engine to answer it, and the force stop that ends
// the stuck turn reports the approval disposition uncertain.
func TestNativeDialogShownDisabled(t *testing.T) {
	r := newRig(t, `{"turns":[{"dialog":{"method":"confirm","title":"Allow?","message":"rm -rf build"},"text":["never"]}]}`, nil)
	r.waitBinding("active")
	ctl, obs := r.dial(), r.dial()
	obs.must(map[string]any{"type": "observe", "request": "o1"}, "observed")
	gen := r.takeover(ctl)
	ctl.must(map[string]any{"type": "prompt", "request": "p1", "generation": gen, "text": "clean up"}, "receipt")

	// The notice and the event travel on different queues of the
	// connection (broadcasts before events), so either may come first.
	var notice map[string]any
	event := false
	obs.await(func(m map[string]any) bool {
		switch {
		case m["record"] == "notice" && m["kind"] == "dialog":
			notice = m
		case m["record"] == "event" && m["kind"] == "unavailable" && m["native"] == "extension_ui_request":
			event = true
		}
		return notice != nil && event
	})
	if !strings.Contains(notice["message"].(string), "disabled") {
		t.Fatalf("dialog notice %v does not say it is disabled", notice)
	}
	ctl.refused(map[string]any{"type": "approval", "request": "a1", "generation": gen}, protocol.CodeUnsupported)

	cf := ctl.confirm("force-stop", gen)
	rc := ctl.must(map[string]any{"type": "force-stop", "request": "f1", "generation": gen, "confirmation": cf}, "receipt")
	if rc["state"] != "stopped" {
		t.Fatalf("force stop receipt %v", rc)
	}
	r.ctrl.mu.Lock()
	disposition := r.ctrl.st.stop.ApprovalDisposition
	r.ctrl.mu.Unlock()
	if disposition != "uncertain" {
		t.Fatalf("approval disposition %q after a dialog nobody answered; want uncertain", disposition)
	}
	if in := r.stdinBytes(); strings.Contains(in, "extension_ui_response") {
		t.Fatalf("something answered the dialog on the engine's stdin: %q", in)
	}
}
