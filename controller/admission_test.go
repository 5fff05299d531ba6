package controller

import (
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/protocol"
)

// TestBindingAdmissionAgreesWithPrompt: the binding's admission says what
// a prompt meets, before and after the engine connection loses a line (a
// message over its framing limit): open while a prompt is acknowledged,
// closed, with the binding uncertain and published at once, while a prompt
// is refused. Issue 10 saw active/open while prompts were refused fenced.
func TestBindingAdmissionAgreesWithPrompt(t *testing.T) {
	r := newRig(t, `{"turns":[{"bulk":3145728,"chunkDelayMs":1}]}`, func(cfg *Config) {
		cfg.EngineMaxLine, cfg.EngineLineLimit = 64<<10, 1<<20
	})
	r.waitBinding("active")
	k := r.dial()
	k.must(map[string]any{"type": "observe", "request": newID("o-")}, "observed")
	gen := r.takeover(k)

	// agree checks the last binding k received against a prompt's fate.
	agree := func(b map[string]any, wantOpen bool) {
		t.Helper()
		if open := b["admission"] == "open"; open != wantOpen {
			t.Fatalf("binding %v: admission %v, want open=%v", b, b["admission"], wantOpen)
		}
		if wantOpen {
			return
		}
		rec := k.reply(map[string]any{"type": "prompt", "request": newID("p-"), "generation": gen, "text": "still there?"})
		if rec["record"] != "refusal" || rec["code"] != protocol.CodeFenced {
			t.Fatalf("the binding says closed (%v), but a prompt got %v", b["admissionReason"], rec)
		}
	}
	r.ctrl.mu.Lock()
	open := r.ctrl.bindingLocked().Admission
	r.ctrl.mu.Unlock()
	if open != "open" {
		t.Fatalf("admission %s before the prompt", open)
	}
	k.must(map[string]any{"type": "prompt", "request": newID("p-"), "generation": gen, "text": "write a lot"}, "receipt")

	lost := k.await(func(m map[string]any) bool { return m["record"] == "event" && m["kind"] == "unavailable" })
	if lost["reason"] != "line-too-long" {
		t.Fatalf("the 3 MiB message_end over a 1 MiB limit gave %v", lost)
	}
	b := k.await(func(m map[string]any) bool { return m["record"] == "binding" && m["state"] == "uncertain" })
	agree(b, false)
	if reason, _ := b["admissionReason"].(string); !strings.Contains(reason, "lost") {
		t.Fatalf("the uncertain binding does not say output was lost: %v", b)
	}
	r.ctrl.mu.Lock()
	now := r.ctrl.bindingLocked()
	r.ctrl.mu.Unlock()
	if now.Admission != "closed" || now.State != "uncertain" {
		t.Fatalf("binding now %+v", now)
	}
}

// TestPreflightReadsOnlyWhatPiAppended: the load check of a recovery asks
// Pi for the entries after the pinned leaf, never for the whole tree, so a
// large session cannot make it wait for one huge answer (issue 10: get_tree
// after an 18 MiB message never arrived in time).
func TestPreflightReadsOnlyWhatPiAppended(t *testing.T) {
	r, k, gen, _ := settledTurn(t, nil)
	k.must(map[string]any{"type": "force-stop", "request": "f1", "generation": gen, "confirmation": k.confirm("force-stop", gen)}, "receipt")
	el := k.must(map[string]any{"type": "recover", "request": "rv", "generation": gen, "confirmation": k.confirm("recover", gen)}, "eligibility")
	k.must(map[string]any{"type": "launch", "request": "l1", "generation": gen, "eligibility": el["id"]}, "receipt")
	r.waitBinding("active")
	in := r.stdinBytes()
	if strings.Contains(in, `"get_tree"`) {
		t.Fatalf("the load check asked for the whole tree:\n%s", in)
	}
	if want := `"since":"` + el["leaf"].(string) + `"`; !strings.Contains(in, want) {
		t.Fatalf("the recovery's load check did not ask for the entries since the pinned leaf %v (%s):\n%s", el["leaf"], want, in)
	}
}
