package main

import (
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
	"github.com/mosaic-agents/mosaic/scopes"
	"github.com/mosaic-agents/mosaic/units"
)

// piConversation is a conversation on the pinned real Pi whose model is a
// stub playing a script, with its socket listening.
type piConversation struct {
	bin  string // the mosaicctl under test
	id   string
	proj string // the project directory: the tool's working directory
	path string // the conversation socket
	stub *stubmodel.Server
	// agent is the user's agent directory (--agent-dir: the stub's
	// models.json).
	agent string
}

// realPiConversation installs the units and registers a conversation on
// seat with the pinned Pi (MOSAIC_PI) talking to a stub model that plays
// script, then starts its socket. Cleanups stop the engine and the units, uninstall and
// close the stub, in that order.
func realPiConversation(t *testing.T, seat string, script stubmodel.Script, flags ...string) piConversation {
	t.Helper()
	bin := sandboxtest.Bin(t, "mosaicctl")
	pi, model, stub := sandboxtest.StubPi(t, script)
	id, proj, path := startConversation(t, bin, seat, append([]string{
		"--engine", pi, "--provider", model.Provider, "--model", model.Model, "--agent-dir", model.AgentDir}, flags...)...)
	return piConversation{bin: bin, id: id, proj: proj, path: path, stub: stub, agent: model.AgentDir}
}

// startConversation installs the units, registers a conversation on seat
// in a fresh project with the further `conv add` flags, and starts its
// socket (the controller starts on the first connection). It returns the
// id, the project directory and the socket path.
func startConversation(t *testing.T, bin, seat string, flags ...string) (id, proj, path string) {
	t.Helper()
	sandboxtest.Require(t) // install and the socket need the sandbox's user manager
	mustRun(t, bin, "install")
	t.Cleanup(func() { run(t, bin, "uninstall", "--force") })
	proj, session := project(t, seat)
	id = strings.TrimSpace(mustRun(t, bin, append([]string{"conv", "add",
		"--project", proj, "--seat", seat, "--session", session}, flags...)...))
	sock := "mosaic-conv@" + id + ".socket"
	mustRun(t, "systemctl", "--user", "start", sock)
	// The engine first, with a proven stop: an engine whose controller a
	// test lost (loseController) is left running by a stop of the units,
	// and the next test in this sandbox could not uninstall
	// (engine-alive).
	t.Cleanup(func() { endConversation(t, bin, id) })
	path, err := units.SocketPath(id)
	if err != nil {
		t.Fatal(err)
	}
	return id, proj, path
}

// loseController ends a conversation's controller the one way that does
// not stop its engine first: a crash (SIGKILL), then a stop of the units
// (svc first, then the rest) before Restart= brings it back. The fd store
// lets go of the engine's descriptors unproven: the engine reads EOF, and
// a scope with a process left in it is held by its anchor. A plain
// `systemctl --user stop` ends the engine with a proof instead
// (TestServiceStopEndsEngineWithProof).
func loseController(t *testing.T, svc string, units ...string) {
	t.Helper()
	mustRun(t, "systemctl", "--user", "kill", "--signal=KILL", svc)
	mustRun(t, "systemctl", append([]string{"--user", "stop", svc}, units...)...)
}

// endConversation is the cleanup of a test's conversation: the engine
// first, with a proven stop (a stop of the units ends only a running
// controller's engine; one whose controller the test lost stays, and a
// later test in this sandbox could not uninstall: engine-alive), then the
// units. A scope the stop did
// not end (the test failed mid-turn, the stop timed out under load) is
// killed and logged, so one failure does not cascade into the next test.
func endConversation(t *testing.T, bin, id string) {
	t.Helper()
	if r := run(t, bin, "stop", "--take", "--yes", "--timeout", "1m", id); r.code != 0 {
		t.Logf("cleanup: stop %s: exit %d: %s", id, r.code, strings.TrimSpace(r.stderr))
	}
	run(t, "systemctl", "--user", "stop", "mosaic-conv@"+id+".socket", "mosaic-conv@"+id+".service")
	out := run(t, "systemctl", "--user", "list-units", "--plain", "--no-legend", "--all", "mosaic-engine-*.scope").stdout
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if conv, _, ok := scopes.ParseEngineScope(f[0]); ok && conv == id {
			t.Logf("cleanup: %s outlived the stop; killing it", f[0])
			run(t, "systemctl", "--user", "kill", "--signal=KILL", f[0])
			run(t, "systemctl", "--user", "stop", f[0])
		}
	}
}
