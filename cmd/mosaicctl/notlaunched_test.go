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
// no-engine refusal of a prompt names the `conv add` that gives it one,
// and that command, typed as given (PATH filled in), makes the next
// prompt answered: it restarts the controller, which launches only when
// it starts. Once, the controller went on running without an engine
// after the add, `stop` and `recover` refused (nothing to stop, no
// proven stop) and every prompt refused no-engine again: a dead end;
// then the refusal named a restart for the user to type as well.
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
	// The add restarts the controller itself (it runs no engine): no
	// systemctl is left for the user to type.
	if len(cmds) != 1 || !strings.HasPrefix(cmds[0], "mosaicctl conv add ") {
		t.Fatalf("no-engine refusal %q names %q; want the conv add that pins an engine, and only it", r.stderr, cmds)
	}
	args := strings.Fields(strings.Replace(cmds[0], "--engine PATH", "--engine "+pi, 1))
	if r := run(t, bin, args[1:]...); r.code != 0 || !strings.Contains(r.stderr, "restarted mosaic-conv@"+id+".service") {
		t.Fatalf("the named fix %q: exit %d, stdout %q, stderr %q; want the controller restarted", cmds[0], r.code, r.stdout, r.stderr)
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
