package scopes

import (
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// graceEngine starts a tool that takes 300 ms to finish once it gets
// SIGTERM (a build writing out, a git command removing its lock), then
// becomes cat, which dies of SIGTERM at once.
const graceEngine = `sh -c 'trap "sleep 0.3; echo tool-done; exit 0" TERM; echo "tool $$"; while :; do sleep 0.05; done' &
echo "ready 1"; exec cat`

// slowGraceEngine starts a tool whose SIGTERM handler says so, ignores
// further SIGTERMs (its sleep inherits that) and takes 2 s, longer than a
// 400 ms grace and the hold past it (holdPastGrace), then becomes cat,
// which dies of SIGTERM at once.
const slowGraceEngine = `sh -c 'trap "trap \"\" TERM; echo tool-term; sleep 2; echo tool-done; exit 0" TERM; echo "tool $$"; while :; do sleep 0.05; done' &
echo "engine $$"; echo "ready 1"; exec cat`

// forgeEngine starts a tool that ignores SIGTERM, tries to open the held
// child's stop pipe for writing (through the held child's descriptor, or
// its own should one have leaked into the engine) and says why each was
// refused, sends the held child (PID 1 of the namespace) SIGTERM half a
// second later, which it forwards to the engine, and sleeps on.
const forgeEngine = `sh -c 'trap "" TERM; echo "tool $$"
for p in /proc/1/fd/5 /proc/self/fd/5; do if why=$( (: > $p) 2>&1 ); then echo "forged $p"; else echo "refused $p: $why"; fi; done
sleep 0.5; kill -TERM 1; exec sleep 300' &
echo "ready 1"; exec cat`

// stubbornToolEngine starts a tool that ignores SIGTERM; the engine
// ignores it too when ignore is set, else it dies of it (cat).
func stubbornToolEngine(ignore bool) string {
	engine := "exec cat"
	if ignore {
		engine = `trap "" TERM; cat; exit 0`
	}
	return `sh -c 'trap "" TERM; echo "tool $$"; exec sleep 300' & echo "ready 1"; ` + engine
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
	// The held child that outlived the engine still exits with the
	// engine's status: cat's death of SIGTERM, 128+15.
	<-e.Done()
	var exit *exec.ExitError
	if err := e.ExitErr(); !errors.As(err, &exit) || exit.ExitCode() != 143 {
		t.Fatalf("exit %v, want the engine's: status 143 (SIGTERM)", err)
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
	// The held child's descriptor is there and refused to a process that
	// may not ptrace it; none leaked into the tool.
	// (dash says ENOENT on a create as "Directory nonexistent").
	want := map[string]string{"/proc/1/fd/5": "Permission denied", "/proc/self/fd/5": "nonexistent|No such file"}
	said, toolPID := map[string]string{}, ""
	for len(said) < len(want) || toolPID == "" {
		l := e.line(t)
		if v, ok := strings.CutPrefix(l, "tool "); ok {
			toolPID = v
		}
		for p := range want {
			if strings.HasPrefix(l, "forged "+p) || strings.HasPrefix(l, "refused "+p+":") {
				said[p] = l
			}
		}
	}
	for p, why := range want {
		if !strings.HasPrefix(said[p], "refused ") || !regexp.MustCompile(why).MatchString(said[p]) {
			t.Errorf("a tool opening %s for writing: %q; want refused, %s", p, said[p], why)
		}
	}
	tool := e.pin(t, toolPID)
	tool.waitDead(t)
}

// uncertainStop runs a stop whose TERM phase (a 200 ms grace) signals and
// whose kill phase then ends uncertain before it kills anything: the
// freeze is refused.
func uncertainStop(t *testing.T, m *Manager, e *engine) {
	t.Helper()
	m.faults.afterFrozen = func() error { return errors.New("injected: the freeze refused") }
	res := e.Stop(ctxT(t), StopOptions{Stop: "stop-uncertain", Grace: 200 * time.Millisecond})
	m.faults.afterFrozen = nil
	if res.Outcome != Uncertain {
		t.Fatalf("outcome %s (%s), want uncertain", res.Outcome, res.Reason)
	}
}

// awaitEnd waits up to 5 s for the held child's exit, and for the tool
// with it: the namespace's end.
func awaitEnd(t *testing.T, e *engine, tool pinned, why string) {
	t.Helper()
	select {
	case <-e.Done():
	case <-time.After(5 * time.Second):
		t.Fatalf("the held child did not exit within 5 s %s", why)
	}
	tool.waitDead(t)
}

// TestGraceHoldsOnlyUntilItsEnd (mutant 296): the namespace outlives the
// engine only inside a stop's grace. The engine dies of the TERM phase's
// SIGTERM, a tool ignores it, and the kill phase ends uncertain without
// killing: at the grace's end the held child exits and the namespace ends
// with the tool in it. A later, ordinary exit of an engine that outlived
// such a stop ends the namespace at once.
func TestGraceHoldsOnlyUntilItsEnd(t *testing.T) {
	m := testManager(t)
	t.Run("engine died in the grace", func(t *testing.T) {
		e := launchEngine(t, m, stubbornToolEngine(false))
		requireConfined(t, e)
		tool := e.pin(t, e.expect(t, "tool", "ready")["tool"])
		uncertainStop(t, m, e)
		awaitEnd(t, e, tool, "after the grace of a stop that ended uncertain")
	})
	t.Run("engine exits after the stop", func(t *testing.T) {
		e := launchEngine(t, m, stubbornToolEngine(true))
		requireConfined(t, e)
		tool := e.pin(t, e.expect(t, "tool", "ready")["tool"])
		uncertainStop(t, m, e)
		if !tool.alive(t) {
			t.Fatal("the tool died in the stop: the test proves nothing")
		}
		e.Stdin.Close() // cat, then the engine, exits
		awaitEnd(t, e, tool, "after an ordinary exit of the engine")
	})
}

// TestResumeKeepsTheGrace (mutant 301): a handle resumed through kept
// descriptors, as a restarted controller's is, stops as the launch's
// handle would: the stop pipe gives the tools their grace. A kept stop
// pipe that is not a write end is dropped, and the resumed handle does
// without.
func TestResumeKeepsTheGrace(t *testing.T) {
	m := testManager(t)
	resume := func(t *testing.T, e *engine, stop *os.File) *Handle {
		t.Helper()
		pidfd, err := e.EnginePidFD()
		if err != nil {
			t.Fatal(err)
		}
		h, err := m.Resume(e.Cohort, Kept{Stdin: dupFile(t, e.Stdin), Stdout: dupFile(t, e.Stdout), PidFD: pidfd, Stop: stop})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(h.Close)
		return h
	}
	t.Run("kept", func(t *testing.T) {
		e := launchEngine(t, m, graceEngine)
		requireConfined(t, e)
		tool := e.pin(t, e.expect(t, "tool", "ready")["tool"])
		stop := e.StopPipe()
		if stop == nil {
			t.Fatal("a confined launch's handle has no stop pipe to keep")
		}
		h := resume(t, e, dupFile(t, stop))
		res := h.Stop(ctxT(t), StopOptions{Stop: "stop-resumed-grace", Grace: 5 * time.Second})
		if res.Outcome != Stopped {
			t.Fatalf("outcome %s (%s)", res.Outcome, res.Reason)
		}
		requireProof(t, res)
		if l := e.line(t); l != "tool-done" {
			t.Fatalf("engine output %q, want the tool's tool-done: the resumed stop cut its grace short", l)
		}
		if tool.alive(t) {
			t.Fatal("stopped with the tool alive")
		}
	})
	// A later TERM phase (the resumed stop's, K10) while an earlier grace
	// runs, the engine already ended in it: the tool's handler, deaf to a
	// second SIGTERM, outlasts the earlier deadline and finishes inside
	// the later one, where the held child used to exit at the earlier one
	// and end the namespace under it.
	t.Run("a later grace", func(t *testing.T) {
		e := launchEngine(t, m, slowGraceEngine)
		requireConfined(t, e)
		got := e.expect(t, "tool", "engine", "ready")
		tool, engine := e.pin(t, got["tool"]), e.pin(t, got["engine"])
		h := resume(t, e, dupFile(t, e.StopPipe()))
		first := make(chan TermResult, 1)
		go func() { first <- e.Term(ctxT(t), 400*time.Millisecond) }()
		if l := e.line(t); l != "tool-term" {
			t.Fatalf("engine output %q, want the tool's tool-term", l)
		}
		engine.waitReaped(t) // by the held child, inside the first grace
		term := h.Term(ctxT(t), 5*time.Second)
		if r := <-first; r.Emptied {
			t.Fatalf("the first TERM phase emptied the cgroup (%+v): the test proves nothing", r)
		}
		if l := e.line(t); l != "tool-done" {
			t.Fatalf("engine output %q, want the tool's tool-done: the earlier deadline ended the namespace inside the later grace", l)
		}
		if !term.Emptied || tool.alive(t) {
			t.Fatalf("later TERM phase %+v, tool alive %v: want the cgroup emptied", term, tool.alive(t))
		}
	})
	t.Run("a read end", func(t *testing.T) {
		e := launchEngine(t, m, echoEngine)
		e.expect(t, "ready")
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		h := resume(t, e, r)
		if h.StopPipe() != nil {
			t.Fatal("resumed with a pipe's read end as the stop pipe")
		}
		if res := h.Stop(ctxT(t), StopOptions{Stop: "stop-resumed-bare", Grace: time.Second}); res.Outcome != Stopped {
			t.Fatalf("outcome %s (%s)", res.Outcome, res.Reason)
		}
	})
}
