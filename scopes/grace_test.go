package scopes

import (
	"strings"
	"testing"
	"time"
)

// graceEngine starts a tool that takes 300 ms to finish once it gets
// SIGTERM (a build writing out, a git command removing its lock), then
// becomes cat, which dies of SIGTERM at once.
const graceEngine = `sh -c 'trap "sleep 0.3; echo tool-done; exit 0" TERM; echo "tool $$"; while :; do sleep 0.05; done' &
echo "ready 1"; exec cat`

// forgeEngine starts a tool that ignores SIGTERM, tries to write the held
// child's stop pipe through /proc, sends the held child (PID 1 of the
// namespace) SIGTERM half a second later, which it forwards to the
// engine, and sleeps on.
const forgeEngine = `sh -c 'trap "" TERM; echo "tool $$"; if (echo x > /proc/1/fd/5) 2>/dev/null; then echo "forged 1"; else echo "refused 1"; fi; sleep 0.5; kill -TERM 1; exec sleep 300' &
echo "ready 1"; exec cat`

// requireConfined skips nothing: a test of the held child's part in the
// engine's pid namespace proves nothing of an engine without one.
func requireConfined(t *testing.T, e *engine) {
	t.Helper()
	if !e.Cohort.Confinement.Confined {
		t.Fatalf("engine not confined: %s", e.Cohort.Confinement.Reason)
	}
}

// TestTermGraceReachesTools (mutant 294): a stop's TERM phase gives a
// confined engine's tools their grace. The engine dies of SIGTERM at
// once and its tool takes 300 ms to finish: the held child, told of the
// stop on its stop pipe, outlives the engine until the tool is done,
// where its exit ended the pid namespace and SIGKILLed the tool inside
// its grace.
func TestTermGraceReachesTools(t *testing.T) {
	m := testManager(t)
	e := launchEngine(t, m, graceEngine)
	requireConfined(t, e)
	tool := e.pin(t, e.expect(t, "tool", "ready")["tool"])
	res := e.Stop(ctxT(t), StopOptions{Stop: "stop-grace", Grace: 5 * time.Second})
	if res.Outcome != Stopped {
		t.Fatalf("outcome %s (%s)", res.Outcome, res.Reason)
	}
	requireProof(t, res)
	if res.Term == nil || !res.Term.Emptied {
		t.Fatalf("TERM phase %+v: want the cgroup emptied within the grace", res.Term)
	}
	if l := e.line(t); l != "tool-done" {
		t.Fatalf("engine output %q, want the tool's tool-done: it did not finish its SIGTERM handler", l)
	}
	if tool.alive(t) {
		t.Fatal("stopped with the tool alive")
	}
}

// TestToolCannotHoldTheNamespace (mutant 295): only the controller tells
// the held child a stop began. A tool that ignores SIGTERM and sends the
// held child SIGTERM (forwarded to the engine, which dies of it) does not
// outlive its engine: the namespace ends with the engine and takes the
// tool. The stop pipe is out of the tool's reach through /proc too.
func TestToolCannotHoldTheNamespace(t *testing.T) {
	m := testManager(t)
	e := launchEngine(t, m, forgeEngine)
	requireConfined(t, e)
	seen := map[string]string{}
	for seen["forged"] == "" && seen["refused"] == "" {
		k, v, _ := strings.Cut(e.line(t), " ")
		seen[k] = v
	}
	if seen["forged"] != "" {
		t.Fatal("a tool opened the held child's stop pipe for writing")
	}
	tool := e.pin(t, seen["tool"])
	tool.waitDead(t)
}
