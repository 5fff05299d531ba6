package main

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
	"github.com/mosaic-agents/mosaic/protocol"
)

// TestServiceStopEndsEngineWithProof: a stop of a conversation's
// controller service for good (`systemctl --user stop`, not a restart)
// ends its engine with a cohort proof before the controller exits, where
// the engine used to read EOF and end unproven, the scope held by its
// anchor and the claim left active. Idle, the stop is a hibernate, and
// the next client wakes the conversation; with a tool running, it is a
// force stop that ends the tool too, and recover launches again. A
// restart leaves the engine as it is (TestControllerRestartMidTool).
func TestServiceStopEndsEngineWithProof(t *testing.T) {
	sandboxtest.Require(t)
	bin := sandboxtest.Bin(t, "mosaicctl")

	// Each engine gives the prompts it read, in order.
	for _, eng := range []struct {
		name  string
		start func(t *testing.T) (id, proj, path string, prompts func() []string)
	}{
		{"fake Pi", func(t *testing.T) (string, string, string, func() []string) {
			entry, stdinLog := fakeEngine(t, stubmodel.Script{})
			id, proj, path := startConversation(t, bin, "svcstop-idle", "--engine", entry, "--provider", "fakellm", "--model", "fake-model")
			return id, proj, path, func() []string { b, _ := os.ReadFile(stdinLog); return promptsIn(t, b) }
		}},
		{"real Pi", func(t *testing.T) (string, string, string, func() []string) {
			pc := realPiConversation(t, "svcstop-real", stubmodel.Script{})
			return pc.id, pc.proj, pc.path, func() []string { return userTexts(t, pc.proj) }
		}},
	} {
		t.Run("idle: a hibernate the next client wakes, "+eng.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			id, _, path, prompts := eng.start(t)
			svc := "mosaic-conv@" + id + ".service"
			logOnFailure(t, svc)
			before := promptOnce(t, ctx, path, "before the stop")
			start := time.Now()
			mustRun(t, "systemctl", "--user", "stop", svc)
			t.Logf("systemctl --user stop took %v", time.Since(start))
			if n := engineScopes(t, id); n != 0 {
				t.Fatalf("%d engine scopes left after the service stopped", n)
			}
			st := claimOf(t, bin, id)
			if st.Claim == nil || st.Claim.State != claims.Stopped || !st.Claim.Proven || !strings.Contains(st.Claim.Reason, "hibernated: idle as its service is stopping") {
				t.Fatalf("claim after the service stopped: %+v; want stopped, proven, hibernated", st.Claim)
			}
			b, _ := currentBinding(t, ctx, path)
			waitFor(t, func() bool { b, _ = currentBinding(t, ctx, path); return b.State == protocol.BindingActive })
			if b.Execution == before.Execution {
				t.Fatalf("woke as execution %s, the one stopped", b.Execution)
			}
			promptOnce(t, ctx, path, "after the wake")
			if got := prompts(); !slices.Equal(got, []string{"before the stop", "after the wake"}) {
				t.Fatalf("engine prompts %q; nothing may be replayed or lost", got)
			}
		})
	}

	t.Run("a tool running: a force stop, then recover", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		id, path, svc, _ := fakeConversation(t, bin, "svcstop-tool", stubmodel.Script{Turns: []stubmodel.Turn{
			{Text: []string{"running "}, Tool: &stubmodel.ToolCall{Command: "setsid sleep 600 >/dev/null 2>&1 & sleep 600"}},
		}})
		lib := activeLib(t, ctx, path)
		if _, err := lib.c.Takeover(ctx); err != nil {
			t.Fatal(err)
		}
		if r, err := lib.c.Prompt(ctx, "run the tool"); err != nil || r.State != protocol.ReceiptAcknowledged {
			t.Fatalf("prompt: %v %+v", err, r)
		}
		waitFor(t, func() bool { return strings.Contains(strings.Join(lib.lines(), "\n"), "[tool bash running]") })
		mustRun(t, "systemctl", "--user", "stop", svc)
		if n := engineScopes(t, id); n != 0 {
			t.Fatalf("%d engine scopes left after the service stopped mid-tool", n)
		}
		st := claimOf(t, bin, id)
		if st.Claim == nil || st.Claim.State != claims.Stopped || !st.Claim.Proven || strings.Contains(st.Claim.Reason, "hibernated") {
			t.Fatalf("claim after the service stopped mid-tool: %+v; want stopped by a proven force stop", st.Claim)
		}
		if b, _ := currentBinding(t, ctx, path); b.State != protocol.BindingStopped {
			t.Fatalf("binding after the service stopped mid-tool: %+v; want stopped until recover", b)
		}
		mustRun(t, bin, "recover", "--take", id)
		waitFor(t, func() bool { b, _ := currentBinding(t, ctx, path); return b.State == protocol.BindingActive })
	})
}

// logOnFailure logs unit's journal when the test fails.
func logOnFailure(t *testing.T, unit string) {
	t.Helper()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the journal of %s:\n%s", unit, run(t, "journalctl", "--user", "-u", unit, "-o", "cat", "--no-pager").stdout)
		}
	})
}

// userTexts returns the text of each user message in the session file of
// the conversation in proj, in order.
func userTexts(t *testing.T, proj string) []string {
	t.Helper()
	var out []string
	for _, line := range sessionLines(t, proj) {
		var e struct {
			Type    string
			Message struct {
				Role    string
				Content []struct{ Type, Text string }
			}
		}
		if json.Unmarshal([]byte(line), &e) != nil || e.Type != "message" || e.Message.Role != "user" {
			continue
		}
		for _, c := range e.Message.Content {
			if c.Type == "text" {
				out = append(out, c.Text)
			}
		}
	}
	return out
}

// fakeConversation starts a conversation on seat whose engine is the fake
// Pi running script, logs its controller's journal if the test fails, and
// returns its id, socket path, service and the fake's stdin log.
func fakeConversation(t *testing.T, bin, seat string, script stubmodel.Script) (id, path, svc, stdinLog string) {
	t.Helper()
	entry, stdinLog := fakeEngine(t, script)
	id, _, path = startConversation(t, bin, seat, "--engine", entry, "--provider", "fakellm", "--model", "fake-model")
	svc = "mosaic-conv@" + id + ".service"
	logOnFailure(t, svc)
	return id, path, svc, stdinLog
}
