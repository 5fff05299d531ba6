package controller

import (
	"path/filepath"

	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/engine/pi"
)

// hidden are the directories of mosaic's own state that a confined engine
// must not reach (scopes.Spec.Hide): the claims and the executions' anchor
// records (a forged revision would free or take a seat), the prompt queue
// beside them (a forged item would be sent with the user's authority), the
// pinned trees' manifests (a rewritten manifest would pass a changed
// engine) and the conversations' settings (a rewritten engine path and pin
// would launch another program at the next recover). The engine's own
// agent directory, also beside the claims, stays reachable: the engine
// needs it.
func (c *Controller) hidden() []string {
	state := filepath.Dir(c.cfg.Claims.Root())
	out := []string{c.cfg.Claims.Root(), filepath.Join(state, "executions"), filepath.Join(state, "queue")}
	if d, err := pi.PinDir(); err == nil {
		out = append(out, d)
	}
	if d, err := conversations.DefaultDir(); err == nil {
		out = append(out, d)
	}
	return out
}
