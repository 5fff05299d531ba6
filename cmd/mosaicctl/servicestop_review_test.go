package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
	"github.com/mosaic-agents/mosaic/protocol"
)

// TestServiceEndingVerbs (review h140): each systemctl verb on an idle
// conversation's units, against systemd's job at the controller's
// SIGTERM. A restart of the service or of its socket keeps the engine
// (same execution, same scope, claim active); a stop of the socket alone
// or a kill outside a job hibernates it with a proof.
func TestServiceEndingVerbs(t *testing.T) {
	sandboxtest.Require(t)
	bin := sandboxtest.Bin(t, "mosaicctl")
	for _, v := range []struct {
		name    string
		args    func(id string) []string
		restart bool
	}{
		{"restart", func(id string) []string { return []string{"restart", "mosaic-conv@" + id + ".service"} }, true},
		{"try-restart", func(id string) []string { return []string{"try-restart", "mosaic-conv@" + id + ".service"} }, true},
		{"reload-or-restart", func(id string) []string { return []string{"reload-or-restart", "mosaic-conv@" + id + ".service"} }, true},
		{"socket restart", func(id string) []string { return []string{"restart", "mosaic-conv@" + id + ".socket"} }, true},
		{"socket stop", func(id string) []string { return []string{"stop", "mosaic-conv@" + id + ".socket"} }, false},
		{"kill", func(id string) []string { return []string{"kill", "mosaic-conv@" + id + ".service"} }, false},
	} {
		t.Run(v.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			entry, _ := fakeEngine(t, stubmodel.Script{})
			id, _, path := startConversation(t, bin, "verbs-"+strings.ReplaceAll(v.name, " ", "-"), "--engine", entry, "--provider", "fakellm", "--model", "fake-model")
			svc := "mosaic-conv@" + id + ".service"
			logOnFailure(t, svc)
			before := promptOnce(t, ctx, path, "before")
			start := time.Now()
			mustRun(t, "systemctl", append([]string{"--user"}, v.args(id)...)...)
			t.Logf("%s took %v", v.name, time.Since(start))
			if v.restart {
				b, _ := currentBinding(t, ctx, path)
				if b.Execution != before.Execution || b.State != protocol.BindingActive || b.Restart == nil {
					t.Fatalf("after %s: binding %+v (restart %+v); want execution %s re-attached", v.name, b, b.Restart, before.Execution)
				}
				if n := engineScopes(t, id); n != 1 {
					t.Fatalf("%d engine scopes after %s", n, v.name)
				}
				return
			}
			waitFor(t, func() bool { return engineScopes(t, id) == 0 })
			st := claimOf(t, bin, id)
			if st.Claim == nil || st.Claim.State != claims.Stopped || !st.Claim.Proven || !strings.Contains(st.Claim.Reason, "hibernated") {
				t.Fatalf("claim after %s: %+v; want stopped, proven, hibernated", v.name, st.Claim)
			}
			t.Logf("claim reason: %s", st.Claim.Reason)
		})
	}
}

// TestServiceStopLeavesOrphan (review h140): a controller that adopted an
// orphan (W6: a cohort whose controller was lost, so no controller holds
// its stdin) must not end it when its service stops: the brief lets only
// a confirmed force stop of that cohort move it on (§2 "Same boot, engine
// alive"), and the service's stop takes nothing from the orphan that
// would end it anyway (the fd store holds none of its descriptors).
func TestServiceStopLeavesOrphan(t *testing.T) {
	sandboxtest.Require(t)
	bin := sandboxtest.Bin(t, "mosaicctl")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// An engine that outlives the end of its stdin (the agent decides):
	// the fake Pi, then a sleep in its place.
	entry, _ := fakeEngine(t, stubmodel.Script{})
	sh, err := os.ReadFile(entry)
	if err != nil {
		t.Fatal(err)
	}
	sh = []byte(strings.Replace(string(sh), "\nexec ", "\n", 1) + "exec sleep 600\n")
	if err := os.WriteFile(entry, sh, 0o755); err != nil {
		t.Fatal(err)
	}
	id, _, path := startConversation(t, bin, "orphan-stop", "--engine", entry, "--provider", "fakellm", "--model", "fake-model")
	svc, sock := "mosaic-conv@"+id+".service", "mosaic-conv@"+id+".socket"
	logOnFailure(t, svc)
	promptOnce(t, ctx, path, "hi")
	scope := readStatus(t, bin, id).Scope.Name
	loseController(t, svc, sock)
	mustRun(t, "systemctl", "--user", "start", sock)
	// The next controller adopts the orphan: uncertain, no launch.
	b, _ := currentBinding(t, ctx, path)
	if b.State != protocol.BindingUncertain {
		t.Fatalf("binding after the lost controller: %+v; want uncertain (an orphan)", b)
	}
	before := claimOf(t, bin, id).Claim
	mustRun(t, "systemctl", "--user", "stop", svc)
	if got := unitProp(t, scope, "ActiveState"); got != "active" {
		t.Errorf("the orphan's scope %s is %q after a stop of the service: an unconfirmed force stop of an orphan", scope, got)
	}
	if st := claimOf(t, bin, id).Claim; st == nil || st.State != before.State {
		t.Errorf("claim after a stop of the service: %+v; want %s as before (only a confirmed force stop moves an orphan on)", st, before.State)
	}
}
