package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/contrib/fakepi"
	"github.com/mosaic-agents/mosaic/protocol"
)

// hostile is a title with markup, ANSI, bidi controls and newlines: it
// must reach every client byte for byte.
const hostile = "Allow <b>rm -rf</b> **now**? \u001b[31mRED\u001b[0m RLO:\u202eevil.exe\u202c\nline2 \u2028 <script>x</script>"

// dialogScript is a fake Pi script whose first turn opens d before its
// model call.
func dialogScript(t *testing.T, d map[string]any) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"turns": []any{map[string]any{"dialog": d, "text": []string{"after the dialog"}}}})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// pendingApproval starts a turn that opens a dialog and returns the
// controller, an observer, the generation and the first projection as the
// observer saw it.
func pendingApproval(t *testing.T, r *rig) (ctl, obs *peer, gen float64, ap map[string]any) {
	t.Helper()
	r.waitBinding("active")
	ctl, obs = r.dial(), r.dial()
	obs.must(map[string]any{"type": "observe", "request": "o1"}, "observed")
	gen = r.takeover(ctl)
	ctl.must(map[string]any{"type": "prompt", "request": "p1", "generation": gen, "text": "clean up"}, "receipt")
	ap = obs.await(func(m map[string]any) bool { return m["record"] == "approval" && m["state"] != "superseded" })
	return ctl, obs, gen, ap
}

// responses returns the extension_ui_response records the engine read.
func (r *rig) responses() []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(r.stdinBytes(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["type"] == "extension_ui_response" {
			out = append(out, m)
		}
	}
	return out
}

// dialogOpen is what the queue's dispatch asks before it writes.
func (r *rig) dialogOpen() bool {
	r.ctrl.mu.Lock()
	defer r.ctrl.mu.Unlock()
	return r.ctrl.nativeDialogOpenLocked()
}

func answer(req string, gen float64, ap, choice string) map[string]any {
	return map[string]any{"type": "approval", "request": req, "generation": gen, "approval": ap, "choice": choice}
}

// TestApprovalConfirmAnsweredOnce covers P1, H6 and H7: the exact title
// reaches an observer, the binding says waiting-for-approval, the
// controller says a native dialog is open until it is answered, an observer
// and a non-native choice are refused with nothing written, the
// controller's answer is one extension_ui_response with the native id and
// a real boolean, a duplicate sends nothing more, a conflicting one
// refuses, and every client sees approval-resolved with who decided.
func TestApprovalConfirmAnsweredOnce(t *testing.T) {
	r := newRig(t, dialogScript(t, map[string]any{"method": "confirm", "title": hostile, "message": "line1\nline2 &amp;"}), nil)
	ctl, obs, gen, ap := pendingApproval(t, r)
	id, decision := ap["id"].(string), ap["decision"].(string)
	if ap["title"] != hostile || ap["message"] != "line1\nline2 &amp;" || ap["state"] != "pending" || ap["form"] != "confirm" {
		t.Fatalf("approval %v: the render data or state is not exact", ap)
	}
	if ap["controller"] != ctl.id {
		t.Fatalf("approval names controller %v, want %s", ap["controller"], ctl.id)
	}
	obs.await(func(m map[string]any) bool {
		return m["record"] == "binding" && m["engineState"] == protocol.EngineWaitingForApproval && m["pendingApprovals"] == 1.0
	})

	if !r.dialogOpen() {
		t.Fatal("nativeDialogOpenLocked is false with the confirm open")
	}
	obs.refused(answer("a0", gen, id, "true"), protocol.CodeNotController)
	ctl.refused(answer("a1", gen, id, "yes"), protocol.CodeApprovalChoice)
	if n := len(r.responses()); n != 0 {
		t.Fatalf("%d responses written for refused answers", n)
	}

	res := ctl.must(answer("a2", gen, id, "true"), "approval-resolved")
	by, _ := res["resolvedBy"].(map[string]any)
	if res["state"] != "resolved" || res["chosen"] != "true" || by["connection"] != ctl.id || by["request"] != "a2" {
		t.Fatalf("resolution %v", res)
	}
	seen := obs.await(func(m map[string]any) bool { return m["record"] == "approval-resolved" })
	if seen["decision"] != decision || seen["chosen"] != "true" {
		t.Fatalf("observer saw %v", seen)
	}
	if r.dialogOpen() {
		t.Fatal("nativeDialogOpenLocked is still true after the answer")
	}
	again := ctl.must(answer("a3", gen, id, "true"), "approval-resolved") // H6
	if again["chosen"] != "true" || again["request"] != "a3" {
		t.Fatalf("duplicate answer got %v", again)
	}
	ctl.refused(answer("a4", gen, id, "false"), protocol.CodeApprovalConflict) // H7
	obs.settled()

	got := r.responses()
	if len(got) != 1 || got[0]["id"] != decision || got[0]["confirmed"] != true || len(got[0]) != 3 {
		t.Fatalf("engine read %v; want one {type, id:%s, confirmed:true}", got, decision)
	}
}

// TestApprovalSelectExactLabels covers P2: labels with markup, bidi
// controls and newlines reach clients exactly, a client attaching later
// gets the pending approval in observe's answer, a label not among the
// native options (even a near one) is refused with nothing written, and
// the exact label goes out byte for byte.
func TestApprovalSelectExactLabels(t *testing.T) {
	labels := []string{"Allow <i>once</i>", "**Block**", "\u202egnp.exe\u202c (RLO label)", "multi\nline", "\u001b[1mbold\u001b[0m"}
	r := newRig(t, dialogScript(t, map[string]any{"method": "select", "title": hostile, "options": labels}), nil)
	ctl, obs, gen, ap := pendingApproval(t, r)
	got := fmt.Sprint(ap["choices"])
	if want := fmt.Sprint(anySlice(labels)); got != want {
		t.Fatalf("choices %q, want %q", got, want)
	}
	late := r.dial()
	o := late.must(map[string]any{"type": "observe", "request": "o2"}, "observed")
	aps, _ := o["approvals"].([]any)
	if len(aps) != 1 || aps[0].(map[string]any)["id"] != ap["id"] {
		t.Fatalf("observe answered approvals %v, want the pending %v", aps, ap["id"])
	}
	id := ap["id"].(string)
	for _, bad := range []string{"Allow", "gnp.exe (RLO label)", "Allow <i>once</i> ", "true"} {
		ctl.refused(answer("bad-"+bad, gen, id, bad), protocol.CodeApprovalChoice)
	}
	if n := len(r.responses()); n != 0 {
		t.Fatalf("%d responses written for labels not among the options", n)
	}
	ctl.must(answer("a1", gen, id, labels[2]), "approval-resolved")
	obs.settled()
	resp := r.responses()
	if len(resp) != 1 || resp[0]["value"] != labels[2] || resp[0]["id"] != ap["decision"] {
		t.Fatalf("engine read %v", resp)
	}
}

func anySlice(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// TestApprovalTakeoverReprojects covers H5 and P5: a takeover supersedes
// the pending projection and issues a new one for the same decision; the
// old controller's answer refuses revoked, the old projection id refuses
// approval-superseded, and the decision is answered once, through the new
// projection.
func TestApprovalTakeoverReprojects(t *testing.T) {
	r := newRig(t, dialogScript(t, map[string]any{"method": "confirm", "title": "Allow?", "message": "rm"}), nil)
	old, obs, gen, ap := pendingApproval(t, r)
	next := r.dial()
	gen2 := r.takeover(next)
	sup := obs.await(func(m map[string]any) bool {
		return m["record"] == "approval" && m["id"] == ap["id"] && m["state"] == "superseded"
	})
	cur := obs.await(func(m map[string]any) bool { return m["record"] == "approval" && m["supersedes"] == ap["id"] })
	if cur["decision"] != ap["decision"] || cur["id"] == ap["id"] || cur["generation"] != gen2 || cur["title"] != ap["title"] || cur["controller"] != next.id {
		t.Fatalf("re-projection %v of %v (superseded %v)", cur, ap, sup)
	}
	old.refused(answer("a1", gen, ap["id"].(string), "true"), protocol.CodeRevoked)
	next.refused(answer("a2", gen2, ap["id"].(string), "true"), protocol.CodeApprovalSuperseded)
	if n := len(r.responses()); n != 0 {
		t.Fatalf("%d responses after refused answers", n)
	}
	next.must(answer("a3", gen2, cur["id"].(string), "false"), "approval-resolved")
	obs.settled()
	if resp := r.responses(); len(resp) != 1 || resp[0]["confirmed"] != false {
		t.Fatalf("engine read %v, want one confirmed:false", resp)
	}
}

// TestApprovalDeadline covers H8 and P4: when the native timeout passes
// the approval becomes uncertain, an answer refuses approval-closed and
// nothing is written, and the run's settle (native evidence) resolves it
// natively with no invented chooser.
func TestApprovalDeadline(t *testing.T) {
	r := newRig(t, dialogScript(t, map[string]any{"method": "confirm", "title": "Timed", "message": "soon", "timeout": 800}), nil)
	ctl, obs, gen, ap := pendingApproval(t, r)
	if ap["deadline"] == nil {
		t.Fatalf("approval %v has no deadline", ap)
	}
	obs.await(func(m map[string]any) bool {
		return m["record"] == "approval" && m["id"] == ap["id"] && m["state"] == "uncertain"
	})
	ctl.refused(answer("late", gen, ap["id"].(string), "true"), protocol.CodeApprovalClosed)
	fin := obs.await(func(m map[string]any) bool { return m["record"] == "approval-resolved" && m["id"] == ap["id"] })
	if fin["state"] != "resolved-natively" || fin["evidence"] == nil || fin["resolvedBy"] != nil || fin["chosen"] != nil {
		t.Fatalf("native resolution %v", fin)
	}
	if n := len(r.responses()); n != 0 {
		t.Fatalf("%d responses written after the deadline", n)
	}
}

// TestApprovalInterruptUncertain covers P6: an interrupt while a dialog
// is pending makes the approval uncertain, never denied; the interrupt
// cancels the open dialog right after its abort and says so on the stop
// record and the approval; an answer then refuses.
func TestApprovalInterruptUncertain(t *testing.T) {
	r := newRig(t, dialogScript(t, map[string]any{"method": "select", "title": "Gate", "options": []string{"Allow", "Block"}}), nil)
	ctl, obs, gen, ap := pendingApproval(t, r)
	ctl.send(map[string]any{"type": "interrupt", "request": "i1", "generation": gen})
	un := obs.await(func(m map[string]any) bool {
		return m["record"] == "approval" && m["id"] == ap["id"] && m["state"] != "pending"
	})
	if un["state"] != "uncertain" || un["chosen"] != nil {
		t.Fatalf("after interrupt the approval is %v; want uncertain, nobody chose", un)
	}
	rc := ctl.await(func(m map[string]any) bool { return m["record"] == "receipt" && m["request"] == "i1" })
	stop := obs.await(func(m map[string]any) bool {
		return m["record"] == "stop" && m["id"] == rc["stop"] && m["state"] != "fenced" && m["state"] != "cancelling"
	})
	if ids, _ := stop["cancelledDialogs"].([]any); !slices.Contains(ids, ap["decision"]) {
		t.Fatalf("stop %v does not record the cancelled dialog %v", stop, ap["decision"])
	}
	ctl.refused(answer("a1", gen, ap["id"].(string), "Allow"), protocol.CodeApprovalClosed)
	// The fake engine records what it read from its stdin when it next
	// runs: on a loaded machine, after the stop's record reached us.
	waitUntil(t, func() bool { return len(r.responses()) > 0 })
	resp := r.responses()
	if len(resp) != 1 || resp[0]["cancelled"] != true || resp[0]["id"] != ap["decision"] {
		t.Fatalf("engine read %v; want one cancel of %v", resp, ap["decision"])
	}
	if in := r.stdinBytes(); strings.Index(in, `"abort"`) > strings.Index(in, "extension_ui_response") {
		t.Fatalf("the dialog was cancelled before the abort was written: %q", in)
	}
}

// TestApprovalInputDisabled covers P3: an input dialog is shown disabled
// with a reason, offers no choice, refuses an answer, and nothing is ever
// written for it.
func TestApprovalInputDisabled(t *testing.T) {
	r := newRig(t, dialogScript(t, map[string]any{"method": "input", "title": "Name?", "placeholder": "x", "timeout": 700}), nil)
	ctl, obs, gen, ap := pendingApproval(t, r)
	if ap["state"] != "disabled" || ap["reason"] == nil || len(ap["choices"].([]any)) != 0 {
		t.Fatalf("input approval %v", ap)
	}
	ctl.refused(answer("a1", gen, ap["id"].(string), "x"), protocol.CodeApprovalClosed)
	obs.settled()
	if n := len(r.responses()); n != 0 {
		t.Fatalf("%d responses written for an input dialog", n)
	}
}

// TestForceStopCancelsOpenDialog: a force stop with a dialog nobody
// answered makes it uncertain, cancels it before signalling the cohort,
// and records that on the stop and the approval.
func TestForceStopCancelsOpenDialog(t *testing.T) {
	r := newRig(t, dialogScript(t, map[string]any{"method": "confirm", "title": "Allow?", "message": "rm -rf build"}), nil)
	ctl, obs, gen, ap := pendingApproval(t, r)
	cf := ctl.confirm("force-stop", gen)
	rc := ctl.must(map[string]any{"type": "force-stop", "request": "f1", "generation": gen, "confirmation": cf}, "receipt")
	if rc["state"] != "stopped" {
		t.Fatalf("force stop receipt %v", rc)
	}
	un := obs.await(func(m map[string]any) bool {
		return m["record"] == "approval" && m["id"] == ap["id"] && m["cancelled"] == true
	})
	if un["state"] != "uncertain" {
		t.Fatalf("approval after force stop %v", un)
	}
	r.ctrl.mu.Lock()
	s := *r.ctrl.st.stop
	r.ctrl.mu.Unlock()
	// The disposition may be resolved: the fake can read the cancel and
	// settle its run (native evidence) before the TERM lands.
	if s.ApprovalDisposition == "" || !slices.Contains(s.CancelledDialogs, ap["decision"].(string)) {
		t.Fatalf("stop %+v", s)
	}
	// The engine may be killed before it reads the cancel; what it read
	// is never an answer.
	for _, resp := range r.responses() {
		if resp["cancelled"] != true {
			t.Fatalf("engine read %v; want only a cancel", resp)
		}
	}
}

// TestApprovalInterruptRace lands on the fake Pi's pause point before its
// abort response (pinned Pi's abort waits there for a dialog whose
// extension took no signal): the interrupt is still cancelling, the
// approval is already uncertain, the engine has read the cancel of the
// open dialog, and an answer now refuses approval-closed with nothing
// written; released, the interrupt reconciles.
func TestApprovalInterruptRace(t *testing.T) {
	r := newRig(t, dialogScript(t, map[string]any{"method": "confirm", "title": "Allow?", "message": "rm"}), nil)
	ctl, obs, gen, ap := pendingApproval(t, r)
	fc := r.fakeControl()
	ctx := context.Background()
	if err := fc.Arm(ctx, fakepi.PointBeforeAbortResponse); err != nil {
		t.Fatal(err)
	}
	ctl.send(map[string]any{"type": "interrupt", "request": "i1", "generation": gen})
	if _, err := fc.Wait(ctx, fakepi.PointBeforeAbortResponse); err != nil {
		t.Fatal(err)
	}
	obs.await(func(m map[string]any) bool {
		return m["record"] == "approval" && m["id"] == ap["id"] && m["state"] == "uncertain"
	})
	waitUntil(t, func() bool { return len(r.responses()) == 1 })
	if resp := r.responses(); resp[0]["cancelled"] != true || resp[0]["id"] != ap["decision"] {
		t.Fatalf("while the abort is unanswered the engine read %v; want the cancel", resp)
	}
	r.ctrl.mu.Lock()
	state := r.ctrl.st.stop.State
	r.ctrl.mu.Unlock()
	if state != protocol.StopCancelling {
		t.Fatalf("stop is %s while the abort is unanswered", state)
	}
	ctl.refused(answer("a1", gen, ap["id"].(string), "true"), protocol.CodeApprovalClosed)
	if err := fc.Release(ctx, fakepi.PointBeforeAbortResponse); err != nil {
		t.Fatal(err)
	}
	rc := ctl.await(func(m map[string]any) bool { return m["record"] == "receipt" && m["request"] == "i1" })
	if rc["state"] != "reconciled" {
		t.Fatalf("interrupt receipt %v", rc)
	}
	if n := len(r.responses()); n != 1 {
		t.Fatalf("%d responses; want only the cancel", n)
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for i := 0; !cond(); i++ {
		if i > 1500 {
			t.Fatal("condition not met within the bound")
		}
		sleep20()
	}
}

// TestApprovalAnswerRacesTakeover (H5): a takeover that arrives while an
// answer is between its checks and its engine write waits for the write
// (both hold the dispatch lock): the answer resolves the decision for the
// controller that checked it, the takeover then commits, and a decision
// already resolved is not re-projected; the engine reads one response.
func TestApprovalAnswerRacesTakeover(t *testing.T) {
	r := newRig(t, dialogScript(t, map[string]any{"method": "confirm", "title": "Allow?", "message": "rm"}), nil)
	ctl, obs, gen, ap := pendingApproval(t, r)
	next := r.dial()
	r.ctrl.test.beforeAnswer = func() {
		next.send(map[string]any{"type": "takeover", "request": "t2", "generation": gen})
		time.Sleep(200 * time.Millisecond) // the takeover reaches the dispatch lock meanwhile
	}
	res := ctl.must(answer("a1", gen, ap["id"].(string), "true"), "approval-resolved")
	if by := res["resolvedBy"].(map[string]any); by["connection"] != ctl.id || by["generation"] != gen {
		t.Fatalf("resolution %v", res)
	}
	next.await(func(m map[string]any) bool { return m["record"] == "control" && m["request"] == "t2" })
	var order []string
	obs.await(func(m map[string]any) bool {
		switch {
		case m["record"] == "approval-resolved":
			order = append(order, "resolved")
		case m["record"] == "control":
			order = append(order, "control")
		case m["record"] == "approval" && m["supersedes"] != nil:
			t.Fatalf("a resolved decision was re-projected: %v", m)
		}
		return len(order) == 2
	})
	if order[0] != "resolved" {
		t.Fatalf("the observer saw %v; the takeover committed before the answer's write", order)
	}
	obs.settled()
	if resp := r.responses(); len(resp) != 1 || resp[0]["confirmed"] != true {
		t.Fatalf("engine read %v", resp)
	}
}

// TestApprovalTooLargeDisabled: a dialog whose text passes the bound an
// approval keeps cannot be shown whole, so it is disabled with a reason,
// keeps only a prefix, and refuses an answer with nothing written.
func TestApprovalTooLargeDisabled(t *testing.T) {
	r := newRig(t, dialogScript(t, map[string]any{"method": "select", "title": strings.Repeat("T", 70<<10), "options": []string{"Allow", "Block"}, "timeout": 700}), nil)
	ctl, obs, gen, ap := pendingApproval(t, r)
	if ap["state"] != "disabled" || len(ap["choices"].([]any)) != 0 || len(ap["title"].(string)) > 2<<10 || !strings.Contains(ap["reason"].(string), "too large") {
		t.Fatalf("large approval: state %v, %d title bytes, reason %v", ap["state"], len(ap["title"].(string)), ap["reason"])
	}
	ctl.refused(answer("a1", gen, ap["id"].(string), "Allow"), protocol.CodeApprovalClosed)
	obs.settled()
	if n := len(r.responses()); n != 0 {
		t.Fatalf("%d responses written for a disabled dialog", n)
	}
}
