package controller

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/internal/atomicfile"
)

// agentFiles are what the engine takes from the user's agent directory:
// the providers and models, and the credentials (linked, so a token Pi
// refreshes is written back where the user keeps it). Everything else an
// agent directory may hold (settings.json with its extensions and
// packages, extensions/, prompts, themes, skills) stays out.
var agentFiles = []string{"models.json", "auth.json"}

// agentDirOf is the engine's agent directory of cv, beside the claim
// root; ownAgentDir prepares it at each spawn.
func (c *Controller) agentDirOf(cv *conversations.Conversation) string {
	return filepath.Join(filepath.Dir(c.cfg.Claims.Root()), "agent", cv.ID)
}

// ownAgentDir prepares the engine's agent directory (PI_CODING_AGENT_DIR),
// which the controller owns: a fresh settings.json of {} at every spawn
// (so nothing the user's settings or a previous engine persisted there,
// such as queue modes, widens or changes the seal), links to the user's
// models.json and auth.json, nothing else. The user's agent directory is
// the conversation's agent_dir, else ~/.pi/agent.
func (c *Controller) ownAgentDir(cv *conversations.Conversation) (string, error) {
	src := cv.Engine.AgentDir
	if src == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("engine agent directory: %w", err)
		}
		src = filepath.Join(home, ".pi", "agent")
	}
	dir := c.agentDirOf(cv)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("engine agent directory %s: %w", dir, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("engine agent directory %s: %w", dir, err)
	}
	for _, e := range entries {
		// What an engine left (a settings.json it wrote, a lock, a
		// planted extensions/) goes; the links are made again.
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return "", fmt.Errorf("engine agent directory %s: %w", dir, err)
		}
	}
	if err := atomicfile.Write(filepath.Join(dir, "settings.json"), []byte("{}\n"), 0o600); err != nil {
		return "", fmt.Errorf("engine agent directory %s: %w", dir, err)
	}
	for _, name := range agentFiles {
		target := filepath.Join(src, name)
		if _, err := os.Stat(target); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("engine agent directory %s: %w", dir, err)
		}
	}
	return dir, nil
}
