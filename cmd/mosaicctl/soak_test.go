package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
	"github.com/mosaic-agents/mosaic/protocol"
	"golang.org/x/sys/unix"
)

// The reliability campaign (`make soak`): random operations on one
// conversation, each with a random SIGKILL of the controller or of the
// engine at a random moment, and the invariants checked after each.

// soakFigures are what a soak prints at the end.
type soakFigures struct {
	runs, violations int
	ops, faults      map[string]int
	states           map[string]int
}

// engineCgroupPIDs returns the processes of the execution's engine cgroup
// (nil when the scope is gone).
func engineCgroupPIDs(t *testing.T, scope string) []int {
	t.Helper()
	cg := strings.TrimSpace(run(t, "systemctl", "--user", "show", "-p", "ControlGroup", "--value", scope).stdout)
	if cg == "" {
		return nil
	}
	b, _ := os.ReadFile(filepath.Join("/sys/fs/cgroup", cg, "engine", "cgroup.procs"))
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if p, err := strconv.Atoi(f); err == nil {
			pids = append(pids, p)
		}
	}
	return pids
}

// soakInvariants checks what must hold after every step and returns what
// does not: a claim always exists once launched (never lost), is never
// stopped without a proof that verifies, a stopped claim leaves no engine
// scope (no orphan), at most one engine scope runs (never two non-stopped
// claims: the seat key holds one claim, so a second engine would be one no
// claim names), and a running scope is the claim's execution.
func soakInvariants(t *testing.T, bin, id, proj string) []string {
	t.Helper()
	var bad []string
	// A queued prompt's text is unique to its step: the engine holds it
	// at most once however the faults fell (never dispatched twice).
	files, _ := filepath.Glob(filepath.Join(proj, ".pi", "state", "*", "sessions", "*.jsonl"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		seen := map[string]int{}
		for _, text := range messageTexts(strings.Split(string(b), "\n"), "user") {
			if strings.HasPrefix(text, "soak-q") {
				if seen[text]++; seen[text] == 2 {
					bad = append(bad, fmt.Sprintf("the queued prompt %q reached the engine twice", text))
				}
			}
		}
	}
	st := claimOf(t, bin, id)
	scopes := engineScopes(t, id)
	switch {
	case st.Claim == nil:
		bad = append(bad, "the claim is lost")
	case st.Claim.State == claims.Stopped && !st.Claim.Proven:
		bad = append(bad, "stopped without a proof that verifies")
	case st.Claim.State == claims.Stopped && scopes > 0:
		bad = append(bad, fmt.Sprintf("stopped, but %d engine scopes run (orphans)", scopes))
	}
	if scopes > 1 {
		bad = append(bad, fmt.Sprintf("%d engine scopes run for one conversation", scopes))
	}
	if scopes == 1 && st.Claim != nil && st.Scope != nil && st.Scope.ActiveState == "active" && !strings.Contains(st.Scope.Name, strings.ReplaceAll(st.Claim.Execution, "-", `\x2d`)) {
		bad = append(bad, fmt.Sprintf("the running scope %s is not the claim's execution %s", st.Scope.Name, st.Claim.Execution))
	}
	return bad
}

// opName names a step's operation for the figures.
func opName(op []string) string {
	switch {
	case op[0] == "queue":
		return "queue-resume"
	case slices.Contains(op, "--no-wait"):
		return "prompt-queued"
	}
	return op[0]
}

// TestSoak runs MOSAIC_SOAK_RUNS steps (3 by default, bounded by
// MOSAIC_SOAK_TIME, default 2m): each a random operation chosen for the
// state (prompt, a queued prompt, a queue resume or interrupt on an
// active conversation, force stop on an
// active or uncertain one, recover on a stopped one) with a random fault
// at a random moment (none, SIGKILL of the controller, SIGKILL of the
// engine's processes), then the invariants. It prints the figures.
func TestSoak(t *testing.T) {
	sandboxtest.Require(t)
	runs, bound := 3, 2*time.Minute
	if v, err := strconv.Atoi(os.Getenv("MOSAIC_SOAK_RUNS")); err == nil && v > 0 {
		runs = v
	}
	if v, err := time.ParseDuration(os.Getenv("MOSAIC_SOAK_TIME")); err == nil && v > 0 {
		bound = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound+2*time.Minute)
	defer cancel()
	var turns []stubmodel.Turn
	for i := range 500 {
		var chunks []string
		for j := range 30 {
			chunks = append(chunks, fmt.Sprintf("t%d.%d ", i, j))
		}
		turns = append(turns, stubmodel.Turn{Text: chunks, ChunkDelayMS: 20})
	}
	entry, _ := fakeEngine(t, stubmodel.Script{Turns: turns})
	bin := sandboxtest.Bin(t, "mosaicctl")
	id, proj, path := startConversation(t, bin, "soak", "--engine", entry, "--provider", "fakellm", "--model", "fake-model")
	svc := "mosaic-conv@" + id + ".service"
	fastRestart(t)

	fig := soakFigures{ops: map[string]int{}, faults: map[string]int{}, states: map[string]int{}}
	deadline := time.Now().Add(bound)
	for fig.runs < runs && time.Now().Before(deadline) {
		b, _ := currentBinding(t, ctx, path)
		var op []string
		switch b.State {
		case protocol.BindingActive:
			op = [][]string{
				{"prompt", id, "--take", "--timeout", "30s", "--", "soak"},
				{"prompt", id, "--take", "--no-wait", "--timeout", "30s", "--", fmt.Sprintf("soak-q%d", fig.runs)},
				{"queue", "resume", id, "--take", "--timeout", "30s"},
				{"interrupt", id, "--take", "--timeout", "30s"},
				{"stop", id, "--take", "--yes", "--timeout", "30s"},
			}[rand.IntN(5)]
		case protocol.BindingStopped:
			op = []string{"recover", id, "--take", "--timeout", "30s"}
		default:
			op = []string{"stop", id, "--take", "--yes", "--timeout", "30s"}
		}
		fig.ops[opName(op)]++
		cmd := exec.CommandContext(ctx, bin, op...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(rand.IntN(600)) * time.Millisecond)
		switch rand.IntN(3) {
		case 1:
			fig.faults["kill-controller"]++
			run(t, "systemctl", "--user", "kill", "--signal=KILL", svc)
		case 2:
			if b.Scope != "" {
				if pids := engineCgroupPIDs(t, b.Scope); len(pids) > 0 {
					fig.faults["kill-engine"]++
					for _, p := range pids {
						unix.Kill(p, unix.SIGKILL)
					}
				}
			}
		}
		cmd.Wait()
		// Let the controller settle: no launch or stop half done.
		settle := time.Now().Add(45 * time.Second)
		for {
			b, _ = currentBinding(t, ctx, path)
			if (b.State != protocol.BindingLaunching && b.State != protocol.BindingStopping) || time.Now().After(settle) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		fig.states[b.State]++
		fig.runs++
		for _, v := range soakInvariants(t, bin, id, proj) {
			fig.violations++
			t.Errorf("step %d (%v, binding %s): %s", fig.runs, op[0], b.State, v)
		}
	}
	msg := fmt.Sprintf("soak: %d runs, operations %v, faults injected %v (%d), bindings after each %v, invariant violations: %d",
		fig.runs, fig.ops, fig.faults, fig.faults["kill-controller"]+fig.faults["kill-engine"], fig.states, fig.violations)
	t.Log(msg)
	fmt.Println(msg)
}
