package pi

import (
	"errors"
	"testing"

	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/protocol"
)

// Pi's busy answer to a prompt is classified here, wrapped as Conn.Prompt
// wraps it; any other refusal, or the wording on another command, is not.
func TestNativeBusyClassified(t *testing.T) {
	for _, tc := range []struct {
		name, command, text string
		busy                bool
	}{
		{"busy prompt", "prompt", "Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') to queue the message.", true},
		{"no api key", "prompt", "No API key found for provider", false},
		{"other command", "abort", "Agent is already processing", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := protocol.Wrap(protocol.CodeEngineRefused, &engine.NativeError{Command: tc.command, ID: "x", Text: tc.text}, "")
			if got := errors.Is(err, engine.ErrNativeBusy); got != tc.busy {
				t.Fatalf("errors.Is(ErrNativeBusy) = %v; want %v", got, tc.busy)
			}
		})
	}
}
