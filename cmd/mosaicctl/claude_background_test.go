package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/protocol"
)

// TestClaudeBackgroundTaskNotification: a run_in_background Bash tool of
// the real 2.1.328 ends after its turn, while the engine is idle: the CLI
// writes a task-notification user line of its own (promptSource
// "system", a uuid no frame carries; its system task_notification frame
// says the same words) and answers it in a turn nobody prompted. The
// watch vouches for both: the binding stays active and open on the same
// execution, and the next prompt is answered.
func TestClaudeBackgroundTaskNotification(t *testing.T) {
	sandboxtest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := newClaudeRig(t, "cbackground")
	r.approvedTurn(t, "please BASHBG{sleep 2; touch bgdone.txt}")
	before := r.settledIdle(t, ctx)
	// The CLI's turn on the notification ends with its reply; the watch
	// has judged it once it follows the leaf, or closed admission.
	var b protocol.Binding
	waitFor(t, func() bool {
		tr := r.transcripts(t)
		if i := strings.LastIndex(tr, `"turnOrigin":"task_notification"`); i < 0 || !strings.Contains(tr[i:], `"type":"assistant"`) {
			return false
		}
		b, _ = currentBinding(t, ctx, r.path)
		return b.Leaf == r.transcriptLeaf(t, before.SessionID) || b.State != protocol.BindingActive
	})
	if b.State != protocol.BindingActive || b.Admission != protocol.AdmissionOpen || b.Execution != before.Execution {
		t.Fatalf("binding after the task notification %+v; want execution %s, active and open", b, before.Execution)
	}
	if out := mustRun(t, r.bin, "prompt", "--take", r.id, "after the background task"); !strings.Contains(out, "You said: after the background task") {
		t.Fatalf("the prompt after the background task printed %q", out)
	}
	if b := r.settledIdle(t, ctx); b.State != protocol.BindingActive || b.Execution != before.Execution {
		t.Fatalf("binding after the next prompt %+v", b)
	}
}
