package controller

import (
	"os"
	"path/filepath"
	"slices"

	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/engine/pi"
	"github.com/mosaic-agents/mosaic/internal/owner"
	"github.com/mosaic-agents/mosaic/units"
)

// hidden are the directories of mosaic's own state that a confined engine
// must not reach (scopes.Spec.Hide): the claims and the executions' anchor
// records (a forged revision would free or take a seat), the prompt queue
// beside them (a forged item would be sent with the user's authority), the
// pinned trees' manifests (a rewritten manifest would pass a changed
// engine), the conversations' settings (a rewritten engine path and pin
// would launch another program at the next recover), and every
// conversation's engine directories: Pi's agent directories and Claude's
// configuration directories (another conversation's transcript, its
// credentials file, a settings.json or hook planted there for the next
// launch), and install's copy of mosaicctl (units.BinDir: what the next
// controller of every conversation runs). The engine's own directory
// among them comes back through kept.
func (c *Controller) hidden() []string {
	state := filepath.Dir(c.cfg.Claims.Root())
	out := []string{c.cfg.Claims.Root(), filepath.Join(state, "executions"), filepath.Join(state, "queue"),
		agentRoot(state), filepath.Join(state, "claude")}
	if d, err := pi.PinDir(); err == nil {
		out = append(out, d)
	}
	if d, err := conversations.DefaultDir(); err == nil {
		out = append(out, d)
	}
	if d, err := units.BinDir(); err == nil {
		out = append(out, d)
	}
	if exe, err := os.Executable(); err == nil {
		if d := binaryDir(exe); d != "" && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

// binaryDir is the directory to hide for the binary this controller runs
// (exe), wherever install put it: the user manager's XDG_STATE_HOME, which
// the controller's BinDir follows, may not be the shell's that install
// saw. A binary the user can replace is hidden with its directory; one
// only root can replace needs nothing ("").
func binaryDir(exe string) string {
	if owner.BeyondUser(exe) {
		return ""
	}
	real, err := filepath.EvalSymlinks(exe)
	if err != nil {
		return ""
	}
	return filepath.Dir(real)
}

// kept is the engine's own directory under hidden (scopes.Spec.Keep):
// the conversation's Claude directory (configuration and tmp), which spec
// made before the launch. The engine sees it and nothing else of its
// parent. A Pi engine's agent directory is not kept but handed
// (engine.Spec.Dirs): its tools would plant credentials there that Pi
// runs as commands in its own domain.
func (c *Controller) kept() []string {
	if !c.cfg.Conversation.IsClaude() {
		return nil
	}
	state := filepath.Dir(c.cfg.Claims.Root())
	own := filepath.Dir(conversations.ClaudeDirs(state, c.cfg.Conversation.ID).Config)
	if st, err := os.Stat(own); err != nil || !st.IsDir() {
		return nil
	}
	return []string{own}
}

// agentRoot holds every Pi conversation's agent directory (ownAgentDir
// makes STATE/agent/ID).
func agentRoot(state string) string { return filepath.Join(state, "agent") }
