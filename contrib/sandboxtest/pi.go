package sandboxtest

import (
	"os"
	"testing"

	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
)

// StubPi returns the pinned real Pi (MOSAIC_PI) and the stub model, playing
// script, that it is to talk to: pass pi as `conv add --engine` and the
// model's Provider, Model and AgentDir as --provider, --model and
// --agent-dir. The stub is closed when the test ends.
func StubPi(tb testing.TB, script stubmodel.Script) (pi string, model stubmodel.PiModel, stub *stubmodel.Server) {
	tb.Helper()
	return StubPiIn(tb, script, tb.TempDir())
}

// StubPiIn is StubPi with the model's agent directory (models.json) written
// into agent, for a test that plants more there.
func StubPiIn(tb testing.TB, script stubmodel.Script, agent string) (pi string, model stubmodel.PiModel, stub *stubmodel.Server) {
	tb.Helper()
	pi = os.Getenv("MOSAIC_PI")
	if pi == "" {
		Unavailable(tb, "MOSAIC_PI is not set: `make test` installs the pinned Pi")
	}
	stub, err := stubmodel.Start(script)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { stub.Close() })
	model, err = stubmodel.WriteAgentDir(agent, stub.BaseURL())
	if err != nil {
		tb.Fatal(err)
	}
	return pi, model, stub
}
