package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/protocol"
)

// TestClaudeAutoCompaction: the real 2.1.328 compacts a conversation whose
// context is near full (the fake reports it so) before its next request:
// it writes a compact_boundary, attachments and a summary line, all its
// own and announced on its stdout. The watch vouches for them: the
// binding stays active on the same execution and the next prompt is
// answered; a stop records the compacted transcript, and a recover
// resumes on it and answers.
func TestClaudeAutoCompaction(t *testing.T) {
	sandboxtest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := newClaudeRig(t, "ccompact")
	mustRun(t, r.bin, "prompt", "--take", r.id, "hello there")
	mustRun(t, r.bin, "prompt", "--take", r.id, "FULLCONTEXT please")
	before := r.settledIdle(t, ctx)
	if out := mustRun(t, r.bin, "prompt", "--take", r.id, "after the auto compaction"); !strings.Contains(out, "You said: after the auto compaction") {
		t.Fatalf("the prompt that compacted printed %q", out)
	}
	if tr := r.transcripts(t); !strings.Contains(tr, `"subtype":"compact_boundary"`) || !strings.Contains(tr, `"isCompactSummary":true`) {
		t.Fatalf("the CLI did not compact:\n%s", tr)
	}
	// The watch has judged the compacted transcript once it follows its
	// leaf, or has closed admission.
	leaf := r.transcriptLeaf(t, before.SessionID)
	var b protocol.Binding
	waitFor(t, func() bool {
		b, _ = currentBinding(t, ctx, r.path)
		return b.Leaf == leaf || b.State != protocol.BindingActive
	})
	if b.State != protocol.BindingActive || b.Admission != protocol.AdmissionOpen || b.Execution != before.Execution {
		t.Fatalf("binding after the compaction %+v; want execution %s, active and open", b, before.Execution)
	}
	if out := mustRun(t, r.bin, "prompt", "--take", r.id, "after the compaction"); !strings.Contains(out, "You said: after the compaction") {
		t.Fatalf("the prompt after the compaction printed %q", out)
	}
	if res := run(t, r.bin, "stop", "--take", "--yes", r.id); res.code != 0 || !strings.Contains(res.stdout, "stopped") {
		t.Fatalf("stop: exit %d, %q %q", res.code, res.stdout, res.stderr)
	}
	if res := run(t, r.bin, "recover", "--take", r.id); res.code != 0 || !strings.Contains(res.stdout, "launched: execution ") {
		t.Fatalf("recover after the compaction: exit %d, %q %q", res.code, res.stdout, res.stderr)
	}
	if out := mustRun(t, r.bin, "prompt", "--take", r.id, "after the recover"); !strings.Contains(out, "You said: after the recover") {
		t.Fatalf("the prompt after the recover printed %q", out)
	}
	if b := r.settledIdle(t, ctx); b.State != protocol.BindingActive || b.SessionID != before.SessionID {
		t.Fatalf("binding after the recover %+v; want session %s, active", b, before.SessionID)
	}
}
