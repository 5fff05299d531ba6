package controller

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestToolCannotReopenEngineStdio: a tool runs as the engine's child, as
// the same user, in its namespaces, so it can name the engine's stdio
// under /proc/$PPID/fd. Through a pipe there it could write commands into
// the engine's stdin (a prompt, a dialog's answer: the engine driven by
// something other than the controller) and read or forge the engine's
// output before the controller sees it. Reopening a socket through /proc
// fails (ENXIO), so the engine's stdin and stdout must be sockets: the
// tool's writes and reads fail, and the engine reads nothing the
// controller did not write.
func TestToolCannotReopenEngineStdio(t *testing.T) {
	cmd := `for fd in 0 1 2; do printf '%s\n' '{"type":"get_state","id":"forged-by-tool"}' > /proc/$PPID/fd/$fd && echo "wrote fd $fd"; done; ` +
		`timeout 1 head -c1 /proc/$PPID/fd/1 >/dev/null && echo "read fd 1"; timeout 1 head -c1 /proc/$PPID/fd/0 >/dev/null && echo "read fd 0"; echo tried`
	script, err := json.Marshal(map[string]any{"turns": []any{
		map[string]any{"text": []string{"x"}, "tool": map[string]any{"command": cmd}},
		map[string]any{"text": []string{"done"}}}})
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, string(script), nil)
	r.waitBinding("active")
	ctl := r.dial()
	ctl.must(map[string]any{"type": "observe", "request": "o1"}, "observed")
	gen := r.takeover(ctl)
	ctl.must(map[string]any{"type": "prompt", "request": "p1", "generation": gen, "text": "go"}, "receipt")
	end := ctl.await(func(m map[string]any) bool { return m["kind"] == "tool-end" })
	raw, _ := json.Marshal(end)
	out := string(raw)
	if !strings.Contains(out, "tried") {
		t.Fatalf("the tool did not run to its end: %s", out)
	}
	ctl.await(func(m map[string]any) bool { return m["kind"] == "run-settled" })
	for _, what := range []string{"wrote fd 0", "wrote fd 1", "wrote fd 2", "read fd 0", "read fd 1"} {
		if strings.Contains(out, what) {
			t.Errorf("a tool reopened the engine's stdio: %s", what)
		}
	}
	if strings.Contains(r.stdinBytes(), "forged-by-tool") {
		t.Error("the engine read a command a tool wrote into its stdin, not the controller")
	}
}
