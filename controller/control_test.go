package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/activation"
	"github.com/mosaic-agents/mosaic/proofs"
	"github.com/mosaic-agents/mosaic/protocol"
)

const plainScript = `{"turns":[{"text":["Hello ","from ","the ","fake."]}]}`

// E1 on the fake engine, H12, H13, receipt-unknown: a prompt streams to
// the controller and to an observer alike; an exact retry returns the
// same receipt without a second engine write; other content under the
// same id refuses.
func TestPromptStreamsAndDedups(t *testing.T) {
	r := newRig(t, plainScript, nil)
	r.waitBinding("active")
	ctl, obs := r.dial(), r.dial()
	obs.must(map[string]any{"type": "observe", "request": "o1"}, "observed")
	gen := r.takeover(ctl)
	cmd := map[string]any{"type": "prompt", "request": "p1", "generation": gen, "execution": r.execution(), "text": "hi there"}
	rc := ctl.answered(cmd)
	if rc["state"] != "acknowledged" || rc["actor"] != Actor {
		t.Fatalf("receipt %v", rc)
	}
	var text strings.Builder
	obs.await(func(m map[string]any) bool {
		if t, ok := m["text"].(string); ok && m["kind"] == "text-delta" {
			text.WriteString(t)
		}
		return m["kind"] == "run-settled"
	})
	if text.String() != "Hello from the fake." {
		t.Fatalf("observer streamed %q", text.String())
	}
	// H12: the exact retry, from a new connection, with retry set.
	again := r.dial()
	retry := map[string]any{"type": "prompt", "request": "p1", "generation": gen, "execution": r.execution(), "text": "hi there", "retry": true}
	if rc2 := again.must(retry, "receipt"); rc2["id"] != rc["id"] {
		t.Fatalf("retry receipt %v, want the original %v", rc2["id"], rc["id"])
	}
	if n := r.prompts(); n != 1 {
		t.Fatalf("engine received %d prompts, want exactly 1", n)
	}
	// Replay: a late observer asking from seq 3 gets 4, 5, ... in order.
	late := r.dial()
	late.must(map[string]any{"type": "observe", "request": "o2", "fromSeq": 3}, "observed")
	if ev := late.await(func(m map[string]any) bool { return m["record"] == "event" }); ev["seq"] != float64(4) {
		t.Fatalf("replay from seq 3 began with %v", ev)
	}
	// H13: same id, other text.
	ctl.refused(map[string]any{"type": "prompt", "request": "p1", "generation": gen, "execution": r.execution(), "text": "other"}, protocol.CodeConflictingRequest)
	// A retry the controller never saw (it restarted) is never dispatched.
	ctl.refused(map[string]any{"type": "prompt", "request": "p-lost", "generation": gen, "text": "x", "retry": true}, protocol.CodeReceiptUnknown)
	if n := r.prompts(); n != 1 {
		t.Fatalf("engine received %d prompts after refusals, want 1", n)
	}
}

// H1, H2, H4, H15, H11: one takeover wins per generation; the old
// controller is fenced; self-takeover refuses; disconnect keeps control.
func TestTakeoverRaces(t *testing.T) {
	r := newRig(t, plainScript, nil)
	r.waitBinding("active")
	a, b := r.dial(), r.dial()
	gen := r.generation()
	var wg sync.WaitGroup
	results := make([]map[string]any, 2)
	for i, k := range []*peer{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = k.reply(map[string]any{"type": "takeover", "request": fmt.Sprintf("race-%d", i), "generation": gen})
		}()
	}
	wg.Wait()
	var winner, loser *peer
	switch {
	case results[0]["record"] == "control" && results[1]["code"] == protocol.CodeStaleGeneration:
		winner, loser = a, b
	case results[1]["record"] == "control" && results[0]["code"] == protocol.CodeStaleGeneration:
		winner, loser = b, a
	default:
		t.Fatalf("H1: takeover results %v", results)
	}
	if r.generation() != gen+1 {
		t.Fatalf("generation %v, want %v", r.generation(), gen+1)
	}
	winner.refused(map[string]any{"type": "takeover", "request": "self", "generation": r.generation()}, protocol.CodeAlreadyController)
	// The loser takes over properly; the old winner is now revoked.
	r.takeover(loser)
	winner.refused(map[string]any{"type": "prompt", "request": "late", "generation": gen + 1, "text": "stale"}, protocol.CodeRevoked)
	if n := r.prompts(); n != 0 {
		t.Fatalf("H2: engine received %d prompts from a fenced controller", n)
	}
	// H11: the controller disconnects; control stays with it.
	ctlID := loser.id
	loser.c.Close()
	b2 := r.waitBindingField("controllerConnected", false)
	if b2["controller"] != ctlID || b2["admission"] != "open" {
		t.Fatalf("after disconnect: %v", b2)
	}
}

// S1, S5: slash text and observer prompts reach the engine with zero bytes.
func TestZeroEngineBytesOnRefusal(t *testing.T) {
	r := newRig(t, plainScript, nil)
	r.waitBinding("active")
	obs, ctl := r.dial(), r.dial()
	ctl.must(map[string]any{"type": "observe", "request": "o1"}, "observed")
	obs.refused(map[string]any{"type": "prompt", "request": "s5", "generation": r.generation(), "text": "pasted text"}, protocol.CodeNotController)
	gen := r.takeover(ctl)
	for i, text := range []string{"/goal x", "   /goal x", "\t/goal x", "\u00a0/skill:y"} {
		ctl.refused(map[string]any{"type": "prompt", "request": fmt.Sprintf("s1-%d", i), "generation": gen, "text": text}, protocol.CodeTextPolicy)
	}
	if got := r.stdinBytes(); strings.Contains(got, "goal") || strings.Contains(got, "pasted") || strings.Contains(got, `"prompt"`) {
		t.Fatalf("engine stdin holds refused text: %q", got)
	}
	// S3: a slash on a later line is not interpreted by pinned Pi: admitted.
	ctl.must(map[string]any{"type": "prompt", "request": "s3", "generation": gen, "text": "see\n/goal later"}, "receipt")
	// S7: ESC, paste markers and U+2028 travel as one JSON string.
	ctl.settled()
	s7 := "a\x1b[200~b\u2028c\x1b[201~"
	ctl.answered(map[string]any{"type": "prompt", "request": "s7", "generation": gen, "text": s7})
	// The last prompt line, not the last line: the session watch may have
	// asked the engine for its entries (get_entries) since.
	var last map[string]any
	for _, line := range strings.Split(strings.TrimSpace(r.stdinBytes()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["type"] == "prompt" {
			last = m
		}
	}
	if last["message"] != s7 {
		t.Fatalf("S7: engine got %q, want %q", last["message"], s7)
	}
}

// H18 with the durable queue: a prompt during a run is queued, never
// refused busy, and nothing more is written to the engine while the run
// lasts.
func TestQueueWhileRunning(t *testing.T) {
	r := newRig(t, `{"turns":[{"endless":true,"chunkDelayMs":20}]}`, nil)
	r.waitBinding("active")
	ctl := r.dial()
	gen := r.takeover(ctl)
	first := ctl.must(map[string]any{"type": "prompt", "request": "p1", "generation": gen, "text": "go"}, "receipt")
	// The reply says queued; the scheduler writes it after: wait until
	// Pi took it (the endless run then lasts) before the second prompt.
	r.waitItem(first["item"], protocol.ReceiptAcknowledged)
	rc := ctl.must(map[string]any{"type": "prompt", "request": "p2", "generation": gen, "text": "more"}, "receipt")
	if rc["state"] != protocol.ReceiptQueued {
		t.Fatalf("a prompt during a run: %v; want queued", rc)
	}
	if n, st := r.prompts(), ""; n != 1 {
		t.Fatalf("engine received %d prompts, want 1", n)
	} else if st, _ = r.item(rc["item"]); st != protocol.ReceiptQueued {
		t.Fatalf("the prompt sent during the run is %s; want queued", st)
	}
}

// K1 on the fake with a real scope, H17, K6, K7: an interrupt with
// nothing queued reconciles, having written clear_queue before abort on
// the engine's stdin; a tool child that calls setsid is killed by a
// confirmed force stop, which ends stopped with a verifying cohort proof;
// confirmations are single-use; recover needs the proof and a
// confirmation; launch starts a new execution at generation+1 and
// replays nothing.
func TestInterruptForceStopRecover(t *testing.T) {
	script := `{"turns":[{"text":["starting "],"tool":{"command":"setsid sleep 300 & echo $! > child.pid; echo started"}},{"endless":true,"chunkDelayMs":20}]}`
	r := newRig(t, script, nil)
	r.waitBinding("active")
	ctl, other := r.dial(), r.dial()
	ctl.must(map[string]any{"type": "observe", "request": "o1"}, "observed")
	gen := r.takeover(ctl)
	exec1 := r.execution()
	ctl.must(map[string]any{"type": "prompt", "request": "p1", "generation": gen, "text": "run it"}, "receipt")
	ctl.await(func(m map[string]any) bool { return m["kind"] == "tool-end" })

	// Interrupt: clear_queue then abort; reconciled; admission reopens.
	rc := ctl.must(map[string]any{"type": "interrupt", "request": "i1", "generation": gen}, "receipt")
	if rc["state"] != "reconciled" {
		t.Fatalf("interrupt receipt %v", rc)
	}
	log := r.stdinBytes()
	if cq, ab := strings.Index(log, `"clear_queue"`), strings.Index(log, `"abort"`); cq < 0 || ab < 0 || cq > ab {
		t.Fatalf("N1: clear_queue must precede abort on the engine's stdin: %q", log)
	}
	r.waitBindingField("admission", "open")

	// K6: recover without a proven stop refuses.
	ctl.refused(map[string]any{"type": "recover", "request": "rv0", "generation": gen, "confirmation": "cf-none"}, protocol.CodeStopProof)
	// H17: a confirmation from another connection, and one reused.
	cf := ctl.confirm("force-stop", gen)
	other.refused(map[string]any{"type": "answer-confirmation", "request": "x1", "confirmation": cf, "answer": "confirm"}, protocol.CodeConfirmation)

	childPID := readPID(t, r)
	rc = ctl.must(map[string]any{"type": "force-stop", "request": "f1", "generation": gen, "confirmation": cf}, "receipt")
	if rc["state"] != "stopped" {
		t.Fatalf("force stop receipt %v", rc)
	}
	ctl.refused(map[string]any{"type": "force-stop", "request": "f2", "generation": gen, "confirmation": cf}, protocol.CodeFenced)
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", childPID)); err == nil {
		t.Fatalf("K1: the setsid tool child %d survived the force stop", childPID)
	}
	r.ctrl.mu.Lock()
	stop := *r.ctrl.st.stop
	r.ctrl.mu.Unlock()
	p, rep, err := proofs.VerifyBytes(stop.Proof)
	if err != nil || !rep.OK() || p == nil {
		t.Fatalf("the stop's proof does not verify: %v %+v", err, rep)
	}

	// K6: recover needs a confirmation; K7: with one, eligibility, then launch.
	ctl.refused(map[string]any{"type": "recover", "request": "rv1", "generation": gen}, protocol.CodeConfirmation)
	rcf := ctl.confirm("recover", gen)
	el := ctl.must(map[string]any{"type": "recover", "request": "rv2", "generation": gen, "confirmation": rcf}, "eligibility")
	// Mutant 8: a used confirmation must not work twice.
	ctl.refused(map[string]any{"type": "recover", "request": "rv3", "generation": gen, "confirmation": rcf}, protocol.CodeConfirmation)
	if el["proofDigest"] != stop.ProofDigest {
		t.Fatalf("eligibility %v does not name the proof %s", el, stop.ProofDigest)
	}
	before := r.prompts()
	lr := ctl.must(map[string]any{"type": "launch", "request": "l1", "generation": gen, "eligibility": el["id"]}, "receipt")
	if lr["state"] != "launched" || lr["execution"] == exec1 || lr["generation"] != gen+1 {
		t.Fatalf("launch receipt %v", lr)
	}
	ctl.refused(map[string]any{"type": "launch", "request": "l2", "generation": gen + 1, "eligibility": el["id"]}, protocol.CodeEligibility)
	r.waitBinding("active")
	if r.prompts() != before {
		t.Fatal("K7: the new execution received a prompt nobody sent (replay)")
	}
}

func readPID(t *testing.T, r *rig) int {
	t.Helper()
	b, err := os.ReadFile(r.ctrl.cfg.Conversation.Project + "/child.pid")
	if err != nil {
		t.Fatalf("the tool did not record its child: %v", err)
	}
	var pid int
	fmt.Sscan(string(b), &pid)
	// The tool wrote its pid inside the engine's pid namespace.
	r.ctrl.mu.Lock()
	h := r.ctrl.st.exec.handle
	r.ctrl.mu.Unlock()
	host, err := h.HostPID(pid)
	if err != nil {
		t.Fatalf("the tool's child %d: %v", pid, err)
	}
	return host
}

// W10: an entry appended by another writer closes admission.
// W11: the session file holds exactly the engine's own writes.
func TestForeignWriterAndNoWrites(t *testing.T) {
	r := newRig(t, plainScript, nil)
	r.waitBinding("active")
	ctl := r.dial()
	ctl.must(map[string]any{"type": "observe", "request": "o1"}, "observed")
	gen := r.takeover(ctl)
	ctl.must(map[string]any{"type": "prompt", "request": "p1", "generation": gen, "text": "hello"}, "receipt")
	ctl.settled()
	own, _ := os.ReadFile(r.seslog)
	file, _ := os.ReadFile(r.session)
	if len(file) == 0 || string(own) != string(file) {
		t.Fatalf("W11: the session file (%d bytes) is not exactly the engine's own writes (%d bytes)", len(file), len(own))
	}
	f, err := os.OpenFile(r.session, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, `{"type":"message","id":"f0reign1","parentId":null,"timestamp":"2026-12-02T10:00:00Z","message":{"role":"user","content":"x"}}`+"\n")
	f.Close()
	ctl.await(func(m map[string]any) bool { return m["record"] == "notice" && m["kind"] == "foreign-writer" })
	b := r.waitBinding("uncertain")
	if b["admission"] != "closed" || b["reconcile"] != true {
		t.Fatalf("after a foreign append: %v", b)
	}
	ctl.refused(map[string]any{"type": "prompt", "request": "p2", "generation": gen, "text": "more"}, protocol.CodeFenced)
}

// W10 for a new session: a session file another writer makes at the
// path before the engine's first answer (Pi writes its file lazily, with
// O_EXCL) names another session than the engine's; it closes admission
// and is never recorded as the session the engine wrote (mutant 320).
func TestForeignSessionFileBeforeTheFirstAnswer(t *testing.T) {
	r := newRig(t, plainScript, nil)
	r.waitBinding("active")
	if _, err := os.Stat(r.session); !os.IsNotExist(err) {
		t.Fatalf("the session file before any answer: %v; the test needs a new session", err)
	}
	if err := os.WriteFile(r.session, []byte(`{"type":"session","version":3,"id":"f0rged-session","timestamp":"2026-12-02T10:00:00Z","cwd":"/"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := r.waitBinding("uncertain")
	if !strings.Contains(fmt.Sprint(b["admissionReason"]), "not the engine's") {
		t.Fatalf("binding %v: want the reason to name the engine's session", b)
	}
	r.ctrl.mu.Lock()
	written := r.ctrl.st.written
	r.ctrl.mu.Unlock()
	if written != "" {
		t.Fatalf("the forged header was recorded as written: %q", written)
	}
}

func (r *rig) waitBindingField(field string, want any) map[string]any {
	r.t.Helper()
	for range 1500 {
		r.ctrl.mu.Lock()
		b := r.ctrl.bindingLocked()
		r.ctrl.mu.Unlock()
		raw, _ := json.Marshal(b)
		var m map[string]any
		json.Unmarshal(raw, &m)
		if fmt.Sprint(m[field]) == fmt.Sprint(want) {
			return m
		}
		sleep20()
	}
	r.t.Fatalf("binding field %s never became %v", field, want)
	return nil
}

// H3 and mutant 1 (the same recheck guards H9, which no test lands): a
// takeover that commits after a prompt's admission but before its
// dispatch makes the dispatch recheck hold the item: the queue pauses,
// zero bytes reach the engine, and the item stays the old controller's
// until the new one resumes the queue.
func TestDispatchRechecksAfterTakeover(t *testing.T) {
	r := newRig(t, plainScript, nil)
	r.waitBinding("active")
	a, b := r.dial(), r.dial()
	gen := r.takeover(a)
	admitted, proceed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	r.ctrl.test.afterAdmit = func() { once.Do(func() { close(admitted); <-proceed }) }
	res := make(chan map[string]any, 1)
	go func() {
		res <- a.reply(map[string]any{"type": "prompt", "request": "p1", "generation": gen, "text": "from the old controller"})
	}()
	<-admitted
	b.must(map[string]any{"type": "takeover", "request": "t2", "generation": gen}, "control")
	close(proceed)
	m := <-res
	if m["record"] != "receipt" || m["state"] != protocol.ReceiptQueued || m["connection"] != a.id {
		t.Fatalf("prompt admitted before a takeover: %v; want queued, the admitting connection's", m)
	}
	for deadline := time.Now().Add(20 * time.Second); !r.queuePaused(); sleep20() {
		if time.Now().After(deadline) {
			t.Fatalf("the queue never paused; the engine received %d prompts", r.prompts())
		}
	}
	if n := r.prompts(); n != 0 {
		t.Fatalf("engine received %d prompts, want none", n)
	}
	if st, _ := r.item(m["item"]); st != protocol.ReceiptQueued {
		t.Fatalf("item after the held dispatch: %s; want queued", st)
	}
	b.must(map[string]any{"type": "resume-queue", "request": "rq", "generation": gen + 1}, "queue")
	r.waitItem(m["item"], protocol.ReceiptAcknowledged)
	if n := r.prompts(); n != 1 {
		t.Fatalf("engine received %d prompts after the resume, want 1", n)
	}
}

// K9: an interrupt that never settles stays uncertain; ordinary takeover
// is refused while fenced; force stop stays available and proves the stop.
func TestInterruptThatNeverSettles(t *testing.T) {
	r := newRig(t, `{"turns":[{"endless":true,"chunkDelayMs":20}]}`, func(c *Config) { c.AbortTimeout = time.Second })
	r.waitBinding("active")
	fc := r.fakeControl()
	ctl, other := r.dial(), r.dial()
	gen := r.takeover(ctl)
	// The reply says queued; the turn exists once the engine acknowledged.
	ctl.answered(map[string]any{"type": "prompt", "request": "p1", "generation": gen, "text": "go"})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := fc.Arm(ctx, "abort-received"); err != nil {
		t.Fatal(err)
	}
	rc := ctl.must(map[string]any{"type": "interrupt", "request": "i1", "generation": gen}, "receipt")
	if rc["state"] != "uncertain" {
		t.Fatalf("an interrupt whose abort never answers: %v; want uncertain", rc)
	}
	other.refused(map[string]any{"type": "takeover", "request": "t2", "generation": gen}, protocol.CodeFenced)
	ctl.refused(map[string]any{"type": "prompt", "request": "p2", "generation": gen, "text": "more"}, protocol.CodeFenced)
	cf := ctl.confirm("force-stop", gen)
	fs := ctl.must(map[string]any{"type": "force-stop", "request": "f1", "generation": gen, "confirmation": cf}, "receipt")
	if fs["state"] != "stopped" {
		t.Fatalf("force stop after a hung interrupt: %v", fs)
	}
	fc.Release(ctx, "abort-received")
}

// H16: a second controller for the same conversation is refused; the
// first is untouched. The engine's own processes count as engine peers.
func TestSecondControllerAndEnginePeer(t *testing.T) {
	r := newRig(t, plainScript, nil)
	r.waitBinding("active")
	second := New(r.cfg)
	err := second.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "already-active") {
		t.Fatalf("second controller Start = %v; want already-active", err)
	}
	ctl := r.dial()
	gen := r.takeover(ctl)
	ctl.must(map[string]any{"type": "prompt", "request": "p1", "generation": gen, "text": "still mine"}, "receipt")

	r.ctrl.mu.Lock()
	pid := r.ctrl.st.exec.handle.Cohort.PID
	r.ctrl.mu.Unlock()
	judge, err := activation.NewJudge()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		pid    int
		engine bool
	}{{pid, true}, {os.Getpid(), false}} {
		p, err := activation.ProcessPeer(tt.pid)
		if err != nil {
			t.Fatal(err)
		}
		if v := judge.Judge(p); v.Engine != tt.engine {
			t.Errorf("pid %d judged %+v; want engine %v", tt.pid, v, tt.engine)
		}
		p.Close()
	}
}
