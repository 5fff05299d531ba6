package controller

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/internal/atomicfile"
)

// agentFiles are what the engine takes from the user's agent directory
// by a link: the providers and models (read-only in every engine:
// inputs). Its credentials are copied (auth.json, authrelay.go).
// Everything else an agent directory may hold (settings.json with its
// extensions and packages, extensions/, prompts, themes, skills) stays
// out.
var agentFiles = []string{"models.json"}

// agentDirOf is the engine's agent directory of cv, beside the claim
// root; ownAgentDir prepares it at each spawn.
func (c *Controller) agentDirOf(cv *conversations.Conversation) string {
	return filepath.Join(filepath.Dir(c.cfg.Claims.Root()), "agent", cv.ID)
}

// ownAgentDir prepares the engine's agent directory (PI_CODING_AGENT_DIR),
// which the controller owns: a fresh settings.json of {} at every spawn
// (so nothing the user's settings or a previous engine persisted there,
// such as queue modes, widens or changes the seal), a link to the user's
// models.json, and a copy of the user's auth.json, nothing else. A
// refresh the last engine left in its copy goes back to the user's file
// first. The user's agent directory is the conversation's agent_dir,
// else ~/.pi/agent.
func (c *Controller) ownAgentDir(cv *conversations.Conversation) (string, error) {
	src, err := userAgentDir(cv.Engine.AgentDir)
	if err != nil {
		return "", err
	}
	dir := c.agentDirOf(cv)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("engine agent directory %s: %w", dir, err)
	}
	c.authMu.Lock()
	defer c.authMu.Unlock()
	user := filepath.Join(src, "auth.json")
	c.relayLeftover(user, dir)
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
	creds, err := readUserAuth(user)
	if err != nil {
		return "", fmt.Errorf("engine agent directory %s: its credentials: %w", dir, err)
	}
	if creds != nil {
		if err := atomicfile.Write(filepath.Join(dir, "auth.json"), creds, 0o600); err != nil {
			return "", fmt.Errorf("engine agent directory %s: %w", dir, err)
		}
	}
	return dir, nil
}

// relayLeftover carries back a refresh the last engine wrote into its
// copy and the relay had not yet, before the copy is made again. Pi may
// hold the user's lock for a moment: the relay waits for it a little.
func (c *Controller) relayLeftover(user, dir string) {
	var err error
	for try := 0; try < 20; try++ {
		if err = c.relayAuthLocked(user, dir); !errors.Is(err, errAuthLocked) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		c.auditEngine("auth-relay-failed", "the OAuth relay of the last engine's auth.json failed before the launch: "+err.Error(), nil)
	}
}
