package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
	"github.com/mosaic-agents/mosaic/protocol"
)

// TestNoEngineFixWorksAsTyped: a conversation registered where no pi is
// on PATH starts a controller with no engine (binding idle). The
// no-engine refusal of a prompt names the commands that give it one,
// and those commands, typed as given (PATH filled in), make the next
// prompt answered. On a build that named only the `conv add`, the
// controller went on running without an engine, `stop` and `recover`
// refused (nothing to stop, no proven stop) and every prompt refused
// no-engine again: a dead end whose way out (a restart of the
// controller) nothing said.
func TestNoEngineFixWorksAsTyped(t *testing.T) {
	sandboxtest.Require(t)
	bin := sandboxtest.Bin(t, "mosaicctl")
	pi, model, _ := sandboxtest.StubPi(t, stubmodel.Script{Turns: []stubmodel.Turn{{Text: []string{"answered"}}}})
	t.Setenv("PATH", "/usr/bin:/bin") // no pi
	id, _, _ := startConversation(t, bin, "latepin", "--provider", model.Provider, "--model", model.Model, "--agent-dir", model.AgentDir)
	r := run(t, bin, "prompt", "--take", id, "hi")
	wantRefusal(t, r, protocol.CodeNoEngine)
	var cmds []string
	for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(r.stderr, -1) {
		if strings.HasPrefix(m[1], "mosaicctl conv add ") || strings.HasPrefix(m[1], "systemctl ") {
			cmds = append(cmds, m[1])
		}
	}
	if len(cmds) != 2 || !strings.HasPrefix(cmds[0], "mosaicctl conv add ") {
		t.Fatalf("no-engine refusal %q names %q; want the conv add that pins an engine, then the command that launches it", r.stderr, cmds)
	}
	for _, cmd := range cmds {
		args := strings.Fields(strings.Replace(cmd, "--engine PATH", "--engine "+pi, 1))
		name := args[0]
		if name == "mosaicctl" {
			name = bin
		}
		if r := run(t, name, args[1:]...); r.code != 0 {
			t.Fatalf("the named fix %q: exit %d, stdout %q, stderr %q", cmd, r.code, r.stdout, r.stderr)
		}
		if name != bin {
			continue
		}
		// The engine is added, the controller still runs without one:
		// the refusal says so and names the restart, not the new path
		// with the old reason.
		r := run(t, bin, "prompt", "--take", id, "hi")
		wantRefusal(t, r, protocol.CodeNoEngine)
		if !strings.Contains(r.stderr, "still runs with the settings it started with") || !strings.Contains(r.stderr, "`"+cmds[1]+"`") {
			t.Fatalf("no-engine refusal after the conv add: %q; want that the controller still runs with its old settings and %q", r.stderr, cmds[1])
		}
	}
	if r := run(t, bin, "prompt", "--take", id, "hi"); r.code != 0 || r.stdout != "answered\n" {
		t.Fatalf("prompt after the named fix: exit %d, stdout %q, stderr %q; want the answer", r.code, r.stdout, r.stderr)
	}
}

// TestRecoverNamesTheEngineEnd: a recover whose new engine exits at once
// (here Pi refuses an unknown provider) ends 4, and its verdict carries
// the engine's exit and the last lines of its stderr, which name the
// cause, as a prompt's refusal does; "engine connection closed" alone
// named nothing to fix.
func TestRecoverNamesTheEngineEnd(t *testing.T) {
	sandboxtest.Require(t)
	bin := sandboxtest.Bin(t, "mosaicctl")
	pi, _, _ := sandboxtest.StubPi(t, stubmodel.Script{})
	id, _, _ := startConversation(t, bin, "nosuchprovider", "--engine", pi, "--provider", "nosuchprovider", "--model", "m")
	if r := run(t, bin, "stop", "--take", "--yes", id); r.code != 0 {
		t.Fatalf("stop: exit %d, %q", r.code, r.stderr)
	}
	r := run(t, bin, "recover", "--take", id)
	if r.code != exitUnsettled || !strings.Contains(r.stderr, "did not become active") || !strings.Contains(r.stderr, "nosuchprovider") ||
		!strings.Contains(r.stderr, "exited (exit status") {
		t.Fatalf("recover: exit %d, stderr %q; want exit 4 with the engine's exit and its stderr naming the provider", r.code, r.stderr)
	}
}
