package controller

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/internal/atomicfile"
)

// nameToolShell makes the tool shell the held child bound in a Pi
// engine's view (scopes.ToolShell; "" where it bound none) the shell
// Pi's bash tool runs, through shellPath in the settings.json of the
// engine's own agent directory, written after the launch knew whether
// the engine is confined and before Pi reads it: each tool then runs in
// a Landlock domain nested in the engine's, and cannot attach to the
// engine (docs/security.md "Without Yama"). An unconfined engine has no
// tool shell in its view (and Pi refuses a shellPath that does not
// exist), so it keeps the settings.json of {} ownAgentDir wrote; so does
// an engine not handed the controller's agent directory (dirs, its
// Spec's: one of the configuration's own, in tests).
//
// Pi reads the file once, at its start: only a reload reads it again,
// which an extension may ask for and no command the controller sends
// does, and ownAgentDir writes it anew at every spawn, so a tool that
// rewrites it changes nothing. A project's own .pi/settings.json, which
// tools write, would win over it, but Pi reads it only for a trusted
// project, and in RPC mode, with no trust.json in the agent directory,
// none is.
func (c *Controller) nameToolShell(cv *conversations.Conversation, dirs []string, shell string) error {
	dir := c.agentDirOf(cv)
	if shell == "" || !slices.Contains(dirs, dir) {
		return nil
	}
	b, err := json.Marshal(map[string]string{"shellPath": shell})
	if err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(dir, "settings.json"), append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("engine agent directory %s: name the tool shell: %w", dir, err)
	}
	return nil
}
