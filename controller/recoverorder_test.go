package controller

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/protocol"
)

// TestRecoverRefusesBeforePreparing (mutant 315): a recover that will be
// refused (an observer's, an engine's tool's among them; the controller's
// own while the engine runs) prepares nothing: preparing a launch (spec)
// empties and rebuilds the engine's agent directory, under the engine it
// belongs to.
func TestRecoverRefusesBeforePreparing(t *testing.T) {
	var specs atomic.Int32
	r := newRig(t, plainScript, func(c *Config) {
		spec := c.Spec
		c.Spec = func(cv *conversations.Conversation) (engine.Spec, error) {
			specs.Add(1)
			return spec(cv)
		}
	})
	r.waitBinding("active")
	ctl, other := r.dial(), r.dial()
	gen := r.takeover(ctl)
	before := specs.Load()
	other.refused(map[string]any{"type": "recover", "request": "rv0", "generation": gen, "confirmation": "cf-none"}, protocol.CodeNotController)
	ctl.refused(map[string]any{"type": "recover", "request": "rv1", "generation": gen, "confirmation": "cf-none"}, protocol.CodeStopProof)
	if n := specs.Load() - before; n != 0 {
		t.Fatalf("refused recovers prepared %d launches", n)
	}
}

// TestPinsChange: a pin-mismatch refusal names only what changed, in
// words and short digests, and fits a refusal message with its fix.
func TestPinsChange(t *testing.T) {
	was := claims.Pins{EngineVersion: "0.85.1", BinarySHA256: strings.Repeat("a", 64), ArgvDigest: strings.Repeat("b", 64)}
	tests := []struct {
		name string
		now  claims.Pins
		want []string
		not  []string
	}{
		{"moved install", claims.Pins{EngineVersion: "0.85.1", BinarySHA256: was.BinarySHA256, ArgvDigest: strings.Repeat("c", 64)},
			[]string{"argv digest", "bbbbbbbbbbbb…, now cccccccccccc…"}, []string{"version", "sha256"}},
		{"new version", claims.Pins{EngineVersion: "0.86.0", BinarySHA256: strings.Repeat("d", 64), ArgvDigest: was.ArgvDigest},
			[]string{"version 0.85.1, now 0.86.0", "binary sha256"}, []string{"argv"}},
		{"no engine now", claims.Pins{}, []string{"version 0.85.1, now none", "argv digest"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := pinsChange(was, tc.now)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("%q lacks %q", got, w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(got, n) {
					t.Errorf("%q names %q, which did not change", got, n)
				}
			}
			// The whole refusal fits a message uncut, its fix included.
			if msg := pinRefusal(was, tc.now).Message; len(msg) > maxMessage {
				t.Errorf("the refusal is %d bytes, over %d: its fix would be cut", len(msg), maxMessage)
			}
		})
	}
}
