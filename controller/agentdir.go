package controller

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/engine/pi"
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
	c.authMasksNow(cv, true)
	creds, err := c.nextCopy(filepath.Join(src, "auth.json"), dir)
	if err != nil {
		return "", fmt.Errorf("engine agent directory %s: its credentials: %w", dir, err)
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
	if creds != nil {
		if err := atomicfile.Write(filepath.Join(dir, "auth.json"), creds, 0o600); err != nil {
			return "", fmt.Errorf("engine agent directory %s: %w", dir, err)
		}
	}
	return dir, nil
}

// nextCopy is what the next engine's copy of the user's auth.json holds:
// the user's file, after a refresh the last engine left in its copy went
// back to it. When it cannot go back now (Pi holds the user's lock), the
// copy carries it (by the relay's own rules) and the relay takes it back
// later: the refresh token in it may be the only good one.
func (c *Controller) nextCopy(user, dir string) ([]byte, error) {
	err := c.relayAuthLocked(user, dir)
	if err != nil && !errors.Is(err, errAuthLocked) {
		c.auditEngine("auth-relay-failed", "the OAuth relay of the last engine's auth.json failed before the launch: "+err.Error(), nil)
	}
	theirs, rerr := readUserAuth(user, c.authMasks)
	if rerr != nil {
		return nil, rerr
	}
	if err == nil {
		return theirs, nil
	}
	var leftover []byte
	if fd, derr := openDir(dir, false); derr == nil {
		leftover, _ = readOwnAuth(fd, filepath.Join(dir, "auth.json"))
		unix.Close(fd)
	}
	if merged, _, _, _ := pi.RelayAuth(theirs, leftover, time.Now()); merged != nil {
		return merged, nil
	}
	return theirs, nil
}
