package controller

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/queue"
)

const (
	envQueueCrashDir = "MOSAIC_QUEUE_CRASH_DIR"
	envQueueCrashAt  = "MOSAIC_QUEUE_CRASH_AT"
)

// queueCrashTexts are the prompts of the crash scenario, sent back to
// back while the first one runs.
var queueCrashTexts = []string{"crash one", "crash two", "crash three"}

// W5 for the queue: a controller process is SIGKILLed at every fault
// point of admission, dispatch and settle (each write step of every queue
// revision, and the points between the durable write and what follows
// it), then a new controller starts on what it left. Every item is found
// exactly once, no text reached the engine twice, the session file holds
// each text at most once, nothing queued was ever sent, and no item is
// left dispatched: each is settled delivered (the session file holds it)
// or delivery-unknown, and never written again.
func TestQueueCrashAtEveryPoint(t *testing.T) {
	sandboxtest.Require(t)
	if testing.Short() {
		t.Skip("spawns a controller per fault point")
	}
	for n := 1; ; n++ {
		dir, err := filepath.EvalSymlinks(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		admitted, finished, out := runQueueCrash(t, dir, n)
		if finished {
			if n < 30 {
				t.Fatalf("only %d fault points hit; the hooks are not wired:\n%s", n-1, out)
			}
			t.Logf("crashed at each of %d fault points", n-1)
			return
		}
		t.Run(fmt.Sprintf("crash-%03d", n), func(t *testing.T) { checkQueueAfterCrash(t, dir, admitted) })
	}
}

// runQueueCrash runs the scenario in a child test process that kills
// itself at fault point crashAt, and returns the items it saw admitted.
func runQueueCrash(t *testing.T, dir string, crashAt int) (admitted []string, finished bool, out string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestQueueCrashChild$", "-test.v")
	cmd.Env = append(os.Environ(), envQueueCrashDir+"="+dir, envQueueCrashAt+"="+strconv.Itoa(crashAt))
	var b strings.Builder
	cmd.Stdout, cmd.Stderr = &b, &b
	err := cmd.Run()
	sc := bufio.NewScanner(strings.NewReader(b.String()))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == "admitted" {
			admitted = append(admitted, f[1])
		}
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return admitted, false, b.String()
		}
	}
	if err != nil {
		t.Fatalf("crash child at point %d: %v\n%s", crashAt, err, b.String())
	}
	if !strings.Contains(b.String(), "scenario finished") {
		t.Fatalf("crash child at point %d neither crashed nor finished:\n%s", crashAt, b.String())
	}
	return admitted, true, b.String()
}

// TestQueueCrashChild is the crash scenario's controller process; it runs
// only as TestQueueCrashAtEveryPoint's child.
func TestQueueCrashChild(t *testing.T) {
	dir, at := os.Getenv(envQueueCrashDir), os.Getenv(envQueueCrashAt)
	if dir == "" {
		t.Skip("the child of TestQueueCrashAtEveryPoint")
	}
	crashAt, _ := strconv.Atoi(at)
	var n atomic.Int64
	point := func() {
		if n.Add(1) == int64(crashAt) {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	}
	r := newRigAt(t, dir, `{"turns":[{"text":["slow ","answer"],"chunkDelayMs":30}]}`, nil, func(c *Controller) {
		c.test.afterQueued, c.test.beforeDispatch, c.test.afterDispatchRecord = point, point, point
		c.test.queueFault = func(string, string) error { point(); return nil }
	})
	ctl, gen := r.queuedCtl()
	var items []any
	for _, text := range queueCrashTexts {
		rc := ctl.queue(gen, text)
		fmt.Printf("admitted %s\n", rc["item"])
		items = append(items, rc["item"])
	}
	for _, id := range items {
		r.waitItem(id, protocol.ReceiptAcknowledged)
	}
	ctl.settled()
	for deadline := time.Now().Add(20 * time.Second); strings.Count(sessionText(t, r), "Plain answer to") < 2; sleep20() {
		if time.Now().After(deadline) {
			break
		}
	}
	fmt.Println("scenario finished")
}

// checkQueueAfterCrash starts a new controller on what the crashed one
// left and checks the invariants.
func checkQueueAfterCrash(t *testing.T, dir string, admitted []string) {
	r := newRigAt(t, dir, `{"turns":[]}`, nil, nil)
	r.ctrl.mu.Lock()
	items := make(map[string]queue.Item)
	var order []string
	for _, it := range r.ctrl.q.items {
		if _, dup := items[it.ID]; dup {
			t.Errorf("item %s held twice", it.ID)
		}
		items[it.ID] = *it
		order = append(order, it.ID)
	}
	paused, waitingLeft := r.ctrl.q.paused, 0
	r.ctrl.mu.Unlock()
	for _, id := range admitted {
		if _, ok := items[id]; !ok {
			t.Errorf("item %s was reported queued and is lost", id)
		}
	}
	stdin := r.stdinBytes()
	sess := sessionText(t, r)
	for _, text := range queueCrashTexts {
		if n := strings.Count(stdin, `"message":"`+text+`"`); n > 1 {
			t.Errorf("%q reached the engine %d times", text, n)
		}
		if n := strings.Count(sess, `"text":"`+text+`"`); n > 1 {
			t.Errorf("the session file holds %q %d times", text, n)
		}
	}
	for _, id := range order {
		it := items[id]
		text := storedText(r, it)
		inSession := strings.Contains(sess, `"text":"`+text+`"`)
		sent := strings.Contains(stdin, `"message":"`+text+`"`)
		switch it.State {
		case protocol.ReceiptQueued:
			waitingLeft++
			if sent {
				t.Errorf("item %s (%q) is queued but reached the engine", id, text)
			}
		case protocol.ReceiptDispatched:
			t.Errorf("item %s is still dispatched after the restart: it must be settled", id)
		case protocol.ReceiptDelivered:
			if !inSession {
				t.Errorf("item %s is delivered, but the session file does not hold %q", id, text)
			}
		case protocol.ReceiptDeliveryUnknown, protocol.ReceiptAcknowledged:
		default:
			t.Errorf("item %s is %s after a crash", id, it.State)
		}
		if inSession && it.State == protocol.ReceiptQueued {
			t.Errorf("the session file holds %q, and its item is still queued", text)
		}
	}
	var states []string
	for _, id := range order {
		states = append(states, items[id].State)
	}
	t.Logf("after the restart: %v", states)
	if waitingLeft > 0 && !paused {
		t.Errorf("%d items queued after the restart and the queue is not paused", waitingLeft)
	}
	resumeAfterCrash(t, r, order, items)
}

// resumeAfterCrash launches a new engine on what the crash left and
// checks what it receives. The crashed controller's engine outlives it,
// so the restart is fenced (uncertain): the way back is recovery control,
// a force stop (which makes drafts of the items still queued), recover
// and launch. Then the queue is resumed and one new prompt sent: the new
// engine must receive exactly the items still queued after the stop, each
// once, then the new prompt, and never the text of a draft or of an item
// that was dispatched (delivered, delivery-unknown or acknowledged).
func resumeAfterCrash(t *testing.T, r *rig, order []string, items map[string]queue.Item) {
	t.Helper()
	ctl := r.dial()
	ctl.must(map[string]any{"type": "observe", "request": newID("o-")}, "observed")
	gen, state := controlAfterCrash(t, r, ctl)
	if state != protocol.BindingStopped {
		// The restarted controller may have a stop of its own running
		// already (fenced "already running"): then wait for it.
		rc := ctl.reply(map[string]any{"type": "force-stop", "request": newID("f-"), "generation": gen, "confirmation": ctl.confirm("force-stop", gen)})
		if rc["record"] != "receipt" && rc["code"] != protocol.CodeFenced {
			t.Fatalf("force stop of what the crash left: %v", rc)
		}
		r.waitBinding(protocol.BindingStopped)
	}
	// What the crashed controller's engine read is logged by then: its
	// stop is proven, so it is gone, and a line it read late (one the
	// crashed controller wrote right before the crash, read while that
	// engine was still busy) is not taken for the new engine's.
	oldStdin := len(r.stdinBytes())
	// Until then the log could still grow by those late reads, so only now
	// is it whole: no item the restart found queued reached that engine.
	for _, id := range order {
		if it := items[id]; it.State == protocol.ReceiptQueued && strings.Contains(r.stdinBytes()[:oldStdin], `"message":"`+storedText(r, it)+`"`) {
			t.Errorf("item %s was queued at the restart, but its text reached the crashed controller's engine", id)
		}
	}
	// A force stop makes drafts of the queued items: those are what must
	// not be resent; what stays queued goes to the new engine.
	r.ctrl.mu.Lock()
	var want []string
	for _, id := range order {
		if it := r.ctrl.itemLocked(id); it != nil && it.State == protocol.ReceiptQueued {
			want = append(want, it.Current().Text)
		}
	}
	r.ctrl.mu.Unlock()
	el := ctl.must(map[string]any{"type": "recover", "request": newID("rv-"), "generation": gen, "confirmation": ctl.confirm("recover", gen)}, "eligibility")
	if len(r.stdinBytes()) != oldStdin {
		t.Errorf("the restarted controller wrote before an engine was launched and the queue resumed")
	}
	lr := ctl.must(map[string]any{"type": "launch", "request": newID("l-"), "generation": gen, "eligibility": el["id"]}, "receipt")
	if lr["state"] != protocol.ReceiptLaunched {
		t.Fatalf("launch after the crash: %v", lr)
	}
	r.waitBinding("active")
	gen = lr["generation"].(float64)
	ctl.must(map[string]any{"type": "resume-queue", "request": newID("r-"), "generation": gen}, "queue")
	fresh := ctl.queue(gen, "after the crash")
	want = append(want, "after the crash")
	r.waitItem(fresh["item"], protocol.ReceiptAcknowledged)
	var got []string
	for _, line := range strings.Split(r.stdinBytes()[oldStdin:], "\n") {
		if i := strings.Index(line, `"message":"`); i >= 0 && strings.Contains(line, `"type":"prompt"`) {
			rest := line[i+len(`"message":"`):]
			got = append(got, rest[:strings.Index(rest, `"`)])
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("the new engine received %q; want exactly the items still queued, once each: %q", got, want)
	}
	// And no text was written twice, to either engine.
	all := r.stdinBytes()
	for _, text := range queueCrashTexts {
		if n := strings.Count(all, `"message":"`+text+`"`); n > 1 {
			t.Errorf("%q reached the engines %d times", text, n)
		}
	}
	for _, id := range order {
		it := items[id]
		if it.State == protocol.ReceiptQueued {
			continue
		}
		for _, text := range got {
			if text == storedText(r, it) {
				t.Errorf("item %s (%s before the restart) was written again: %q", id, it.State, text)
			}
		}
	}
}

// controlAfterCrash takes control of what the crash left, and says the
// binding's state it was taken in. The restarted controller settles that
// on its own (the crashed controller's engine ends once its stdin is
// gone, and the stop that follows is proven), so the state can change
// between the read and the request: a refusal because it did (a
// confirmation for another stop context, a takeover fenced by the new
// proof) is read again and retried.
func controlAfterCrash(t *testing.T, r *rig, ctl *peer) (float64, string) {
	t.Helper()
	for try := 0; ; try++ {
		r.ctrl.mu.Lock()
		state := r.ctrl.bindingLocked().State
		r.ctrl.mu.Unlock()
		gen := r.generation()
		var m map[string]any
		if state == protocol.BindingUncertain || state == protocol.BindingStopped {
			cf := ctl.reply(map[string]any{"type": "issue-confirmation", "request": newID("ci-"), "operation": "acquire-recovery-control", "generation": gen})
			if id, ok := cf["id"].(string); ok {
				ctl.reply(map[string]any{"type": "answer-confirmation", "request": newID("ca-"), "confirmation": id, "answer": "confirm"})
				m = ctl.reply(map[string]any{"type": "acquire-recovery-control", "request": newID("a-"), "generation": gen, "confirmation": id})
			} else {
				m = cf
			}
		} else {
			m = ctl.reply(map[string]any{"type": "takeover", "request": newID("t-"), "generation": gen})
		}
		if m["record"] == "control" {
			return m["generation"].(float64), state
		}
		if try == 50 || (m["code"] != protocol.CodeConfirmation && m["code"] != protocol.CodeFenced) {
			t.Fatalf("control in state %s after the crash: %v", state, m)
		}
		sleep20()
	}
}

// storedText is an item's text as its stored revision holds it: in memory
// a finished item keeps only digests.
func storedText(r *rig, it queue.Item) string {
	st, err := r.ctrl.q.store.Read(it.ID, it.Revision)
	if err != nil {
		r.t.Fatalf("read item %s revision %d: %v", it.ID, it.Revision, err)
	}
	return st.Current().Text
}
