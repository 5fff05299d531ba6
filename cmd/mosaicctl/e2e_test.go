package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/client"
	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
	"github.com/mosaic-agents/mosaic/protocol"
)

// TestEndToEndRealPi is the whole path on the sandbox's real systemd with
// the real pinned Pi and the stub model, spoken through the client library
// the CLI uses: socket activation, two clients, takeover, a prompt into a
// tool call whose child calls setsid, a confirmed force stop with a proof
// that `mosaicctl proof verify` and `mosaicctl audit` accept, recover,
// launch, and a second prompt.
func TestEndToEndRealPi(t *testing.T) {
	sandboxtest.Require(t)
	pc := realPiConversation(t, "e2e", stubmodel.Script{Turns: []stubmodel.Turn{
		{Text: []string{"Starting ", "a tool."}, Tool: &stubmodel.ToolCall{Command: "setsid sleep 300 & echo $! > child.pid; echo started"}},
		{Text: []string{"The tool ", "said started."}},
		{Text: []string{"Back ", "again."}},
	}})
	// A bound against a hang, not a timing assertion.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	ctl, obs := dialE2E(ctx, t, pc.path), dialE2E(ctx, t, pc.path)

	// The first connection starts the engine: observe until it is active.
	o, err := ctl.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for o.Binding.State != protocol.BindingActive {
		next(ctx, t, ctl, "an active binding", func(u client.Update) bool {
			return u.Binding != nil && u.Binding.State == protocol.BindingActive
		})
		if o, err = ctl.Observe(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := obs.Observe(ctx); err != nil {
		t.Fatal(err)
	}
	if b := o.Binding; b.Cohort != "scope" || !strings.HasPrefix(b.Scope, "mosaic-engine-") {
		t.Fatalf("binding %+v: want the engine in a mosaic-engine scope", b)
	}
	if _, err := ctl.Takeover(ctx); err != nil {
		t.Fatal(err)
	}

	rc, err := ctl.Prompt(ctx, "run the tool")
	if err != nil || rc.State != protocol.ReceiptAcknowledged {
		t.Fatalf("prompt: receipt %+v, %v; want acknowledged", rc, err)
	}
	// E1 on the real Pi: the observer sees the tool and the new answer.
	var text strings.Builder
	sawTool := false
	next(ctx, t, obs, "the observer's run-settled", func(u client.Update) bool {
		if u.Event == nil || u.Event.Execution != rc.Execution {
			return false
		}
		switch u.Event.Kind {
		case protocol.EventToolEnd:
			sawTool = true
		case protocol.EventTextDelta:
			text.WriteString(u.Event.Text)
		}
		return u.Event.Kind == protocol.EventRunSettled
	})
	next(ctx, t, ctl, "the controller's run-settled", settledIn(rc.Execution))
	if !sawTool || !strings.Contains(text.String(), "said started.") {
		t.Fatalf("observer saw tool %v and text %q", sawTool, text.String())
	}
	if _, err := os.ReadFile(filepath.Join(pc.proj, "child.pid")); err != nil {
		t.Fatalf("the tool's setsid child left no pid: %v", err)
	}
	// The pid it wrote is its pid inside the engine's pid namespace: find
	// it in this test's process list instead.
	kids := processesRunning(t, "sleep 300")
	if len(kids) != 1 {
		t.Fatalf("processes running sleep 300: %v, want the tool's one setsid child", kids)
	}
	child := strconv.Itoa(kids[0])
	if cg, err := os.ReadFile("/proc/" + child + "/cgroup"); err != nil || !strings.Contains(string(cg), "mosaic-engine-") {
		t.Fatalf("setsid child %s is not in the engine scope: %q %v", child, cg, err)
	}

	// The confirmation a person would see names what is stopped; the
	// force stop it allows kills the setsid child with the rest.
	cf, err := ctl.IssueConfirmation(ctx, "force-stop")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(cf.Intent, "sleep") {
		t.Errorf("the confirmation does not show what will be stopped: %q", cf.Intent)
	}
	if _, err := ctl.AnswerConfirmation(ctx, cf.ID, client.AnswerConfirm); err != nil {
		t.Fatal(err)
	}
	fs, err := ctl.ForceStop(ctx, cf.ID)
	if err != nil || fs.State != protocol.ReceiptStopped {
		t.Fatalf("force stop: receipt %+v, %v; want stopped", fs, err)
	}
	stop := next(ctx, t, ctl, "the stopped stop record", func(u client.Update) bool {
		return u.Stop != nil && u.Stop.State == "stopped"
	}).Stop
	if _, err := os.Stat("/proc/" + child); err == nil {
		t.Fatalf("the setsid child %s survived the force stop", child)
	}
	proofFile := filepath.Join(t.TempDir(), "proof.json")
	if err := os.WriteFile(proofFile, stop.Proof, 0o600); err != nil {
		t.Fatal(err)
	}
	if out := mustRun(t, pc.bin, "proof", "verify", proofFile); !strings.Contains(out, "verified: all") {
		t.Fatalf("proof verify said %q", out)
	}

	// Recover issues and confirms its own confirmation ("" asks it to).
	el, err := ctl.Recover(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	lr, err := ctl.Launch(ctx, el.ID)
	if err != nil || lr.State != protocol.ReceiptLaunched {
		t.Fatalf("launch: receipt %+v, %v; want launched", lr, err)
	}
	if _, err := ctl.Observe(ctx); err != nil {
		t.Fatal(err)
	}
	rc, err = ctl.Prompt(ctx, "again")
	if err != nil || rc.State != protocol.ReceiptAcknowledged || rc.Execution != lr.Execution {
		t.Fatalf("second prompt: receipt %+v, %v; want acknowledged by the launched execution %s", rc, err, lr.Execution)
	}
	next(ctx, t, ctl, "the second run-settled", settledIn(rc.Execution))

	out := mustRun(t, pc.bin, "audit", pc.id)
	if !strings.Contains(out, "proof "+stop.ProofDigest+": verified") || !strings.Contains(out, "takeover") {
		t.Fatalf("audit output lacks the verified proof or the takeover:\n%s", out)
	}
}

// dialE2E connects one library client, closed when the test ends.
func dialE2E(ctx context.Context, t *testing.T, path string) *client.Client {
	t.Helper()
	c, err := client.Dial(ctx, path, client.Options{Name: "e2e"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// next reads c's updates, replies included, until one satisfies ok and
// returns it; it fails when the connection or ctx ends first.
func next(ctx context.Context, t *testing.T, c *client.Client, what string, ok func(client.Update) bool) client.Update {
	t.Helper()
	for {
		select {
		case u, open := <-c.Updates():
			if !open {
				t.Fatalf("the connection ended while waiting for %s: %v", what, c.Err())
			}
			if ok(u) {
				return u
			}
		case <-ctx.Done():
			t.Fatalf("no %s: %v", what, ctx.Err())
		}
	}
}

// settledIn matches the run-settled event of execution x.
func settledIn(x string) func(client.Update) bool {
	return func(u client.Update) bool {
		return u.Event != nil && u.Event.Kind == protocol.EventRunSettled && u.Event.Execution == x
	}
}
