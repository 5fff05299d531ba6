package controller

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mosaic-agents/mosaic/engine/pi"
	"golang.org/x/sys/unix"
)

// The auth relay. Every Pi engine reads its credentials from a copy of
// the user's auth.json in its own agent directory (ownAgentDir), and the
// user's file is read-only in every engine (inputs): a tool that could
// write the user's file would put a key or a "!command" in it for every
// Pi conversation. Pi writes auth.json only to store an OAuth login it
// refreshed, and a refresh token may be good once: the controller carries
// such a refresh from the copy to the user's file, and a newer login from
// the user's file (another conversation's refresh, a login renewed with
// plain pi) into the copy, under Pi's own lock on each, and nothing else
// (pi.RelayAuth).
//
// Alternatives weighed: the user's file bound writable into the engine
// when it holds a login (what mosaic did: a way between conversations);
// read-only (Pi's refresh fails and the login ends within hours); a
// relay through inotify (one more descriptor per watched file, and Pi
// rewrites its file in place: a poll at the session watch's interval
// reads the two small files).

// authPaths are the user's auth.json of the conversation and its
// engine's agent directory.
func (c *Controller) authPaths() (user, own string, ok bool) {
	cv := c.cfg.Conversation
	if cv == nil || cv.IsClaude() || c.cfg.Spec != nil {
		return "", "", false
	}
	src, err := userAgentDir(cv.Engine.AgentDir)
	if err != nil {
		return "", "", false
	}
	return filepath.Join(src, "auth.json"), c.agentDirOf(cv), true
}

// relayAuthLoop relays for the controller's lifetime, engine or not (a
// refresh the engine wrote just before it ended still goes back), and
// once more as the controller closes.
func (c *Controller) relayAuthLoop() {
	defer c.writes.Done()
	user, own, ok := c.authPaths()
	if !ok {
		return
	}
	t := time.NewTicker(c.cfg.PollInterval)
	defer t.Stop()
	var notes relayNotes
	for {
		closing := false
		select {
		case <-t.C:
		case <-c.closing:
			closing = true
		}
		// Every tick, changed or not: a refresh held back until the
		// user's login expires goes back once it has, with no write to
		// either file to say so. Two small reads a second.
		if msg := notes.note(c.relayAuth(user, own), time.Now()); msg != "" {
			c.auditEngine("auth-relay-failed", msg, nil)
		}
		if closing {
			return
		}
	}
}

// relayAuth carries OAuth refreshes between the user's auth.json and the
// engine's copy in own, each write under Pi's lock of the file it
// changes. c.authMu keeps it apart from ownAgentDir's rebuild.
func (c *Controller) relayAuth(user, own string) error {
	c.authMu.Lock()
	defer c.authMu.Unlock()
	return c.relayAuthLocked(user, own)
}

func (c *Controller) relayAuthLocked(user, own string) error {
	dir, err := openDir(own, false)
	if errors.Is(err, unix.ENOENT) {
		return nil // no engine launched yet
	}
	if err != nil {
		return err
	}
	// Before this controller's first launch too (a resumed engine, a
	// hibernated or stopped conversation): the masks are its own.
	c.authMasksNow(nil, false)
	defer unix.Close(dir)
	ownName := filepath.Join(own, "auth.json")
	mine, err := readOwnAuth(dir, ownName)
	if err != nil {
		return err
	}
	theirs, err := readUserAuth(user, c.authMasks)
	if err != nil {
		return err
	}
	toUser, toOwn, _, _ := pi.RelayAuth(theirs, mine, time.Now())
	if toUser != nil {
		if err := c.relayBack(user, mine); err != nil {
			return err
		}
	}
	if toOwn != nil {
		return c.relayForward(user, dir, ownName)
	}
	return nil
}

// relayBack writes the engine's refreshes (from its copy, mine) into the
// user's auth.json, read again under its lock from the descriptor it is
// written through.
func (c *Controller) relayBack(user string, mine []byte) error {
	udir, err := openDir(filepath.Dir(user), true)
	if err != nil {
		return err
	}
	defer unix.Close(udir)
	// The lock goes where the file is read and written: in this
	// directory, which must lie outside what the engines mask too.
	if err := notMasked(udir, filepath.Dir(user), c.authMasks); err != nil {
		return err
	}
	unlock, err := lockAuth(udir, user)
	if err != nil {
		return err
	}
	defer unlock()
	f, err := openUserAuthAt(udir, filepath.Base(user), user, unix.O_RDWR, c.authMasks)
	if err != nil {
		return err
	}
	defer f.Close()
	theirs, err := readBounded(f, user)
	if err != nil {
		return err
	}
	toUser, _, back, _ := pi.RelayAuth(theirs, mine, time.Now())
	if toUser == nil {
		return nil
	}
	if err := writeUserAuth(f, theirs, toUser); err != nil {
		return err
	}
	c.auditEngine("auth-refresh", fmt.Sprintf("the engine refreshed the OAuth login of %s; written back to %s", strings.Join(back, ", "), user),
		map[string]string{"PROVIDERS": strings.Join(back, ",")})
	return nil
}

// relayForward writes the user's logins into the engine's copy (pi.RelayAuth),
// read again under the copy's lock.
func (c *Controller) relayForward(user string, dir int, ownName string) error {
	unlock, err := lockAuth(dir, ownName)
	if err != nil {
		return err
	}
	defer unlock()
	mine, err := readOwnAuth(dir, ownName)
	if err != nil {
		return err
	}
	theirs, err := readUserAuth(user, c.authMasks)
	if err != nil {
		return err
	}
	_, toOwn, _, forward := pi.RelayAuth(theirs, mine, time.Now())
	if toOwn == nil {
		return nil
	}
	if err := writeOwnAuth(dir, ownName, toOwn); err != nil {
		return err
	}
	c.auditEngine("auth-relayed", fmt.Sprintf("the user's OAuth login of %s in %s given to the engine", strings.Join(forward, ", "), user),
		map[string]string{"PROVIDERS": strings.Join(forward, ",")})
	return nil
}

// userAgentDir is the user's agent directory a conversation names
// (agentDir), else ~/.pi/agent.
func userAgentDir(agentDir string) (string, error) {
	if agentDir != "" {
		return agentDir, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("engine agent directory: %w", err)
	}
	return filepath.Join(home, ".pi", "agent"), nil
}
