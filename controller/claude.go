package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/engine/claude"
	hclaude "github.com/mosaic-agents/mosaic/history/claude"
)

// claudeDirs creates (0700) and returns the controller-owned directories
// of a Claude conversation beside the claim root: CLAUDE_CONFIG_DIR
// (settings, the transcript) and its tmp. The engine reaches these and no
// other conversation's (hidden hides STATE/claude, kept binds this
// conversation's back).
func (c *Controller) claudeDirs(cv *conversations.Conversation) (claude.Dirs, error) {
	d := conversations.ClaudeDirs(filepath.Dir(c.cfg.Claims.Root()), cv.ID)
	for _, p := range []string{d.Config, d.Tmp} {
		if err := os.MkdirAll(p, 0o700); err != nil {
			return claude.Dirs{}, fmt.Errorf("claude directory %s: %w", p, err)
		}
	}
	return d, nil
}

// claudeTranscript reads the conversation's transcript through its
// engine's History, and only that file (history/claude: safe open, never
// listed, another version refused).
func (c *Controller) claudeTranscript(ctx context.Context, cv *conversations.Conversation) (engine.History, error) {
	eng, err := c.engineOf(cv)
	if err != nil {
		return nil, err
	}
	return eng.History(ctx)
}

// claudeHead is the sessionHead of a Claude conversation: the session
// UUID as its id and the transcript's default leaf (the entry --resume
// continues) once the transcript exists.
func (c *Controller) claudeHead(ctx context.Context, cv *conversations.Conversation) (sessionHead, error) {
	t, err := c.claudeTranscript(ctx, cv)
	if err != nil {
		return sessionHead{}, err
	}
	return transcriptHead(cv, t), nil
}

// transcriptHead is the sessionHead of transcript t.
func transcriptHead(cv *conversations.Conversation, t engine.History) sessionHead {
	if t.New() {
		return sessionHead{}
	}
	h := sessionHead{exists: true, id: cv.Claude.Session, leaf: t.DefaultLeaf()}
	h.transcript, _ = t.(*hclaude.Transcript)
	return h
}

// errLoadedChanged is a transcript that no longer begins with the bytes
// the launch read, or holds a prompt after them, once the CLI loaded it.
var errLoadedChanged = errors.New("changed while the engine loaded it (another writer)")

// loadedHead reads the transcript again once the CLI has loaded it. One
// the launch read is followed from that read (hclaude.Follow parses only
// what was appended, and refuses bytes changed in place): the wake held
// those bytes to the ones the stop vouched for, and the CLI read the file
// again as it started, so a writer in between (an entry reworded in
// place, the leaf kept) would have its words loaded, and the watch that
// starts from them vouch for them. What follows them may hold no prompt
// (none was sent yet: admission is closed during the load check), nor
// any line the CLI did not announce: the CLI announced nothing yet (it
// writes nothing before the first prompt, measured), so every line there
// is another writer's.
func (c *Controller) loadedHead(ctx context.Context, cv *conversations.Conversation, head sessionHead) (sessionHead, error) {
	was := head.transcript
	if was == nil {
		return c.claudeHead(ctx, cv)
	}
	now, err := hclaude.Follow(was)
	if err != nil {
		return sessionHead{}, errLoadedChanged
	}
	if v := checkTranscript(was, now, announcedNothing{}, ""); v.foreign != "" || v.unproven != "" {
		return sessionHead{}, errLoadedChanged
	}
	return transcriptHead(cv, now), nil
}

// readHead reads the bound session's head, whatever the engine kind.
// Pi's is read here rather than through its engine's History: the
// foreign-writer watch follows the snapshot (history.Follow), which the
// seam's History does not expose.
func (c *Controller) readHead(ctx context.Context) (sessionHead, error) {
	cv := c.cfg.Conversation
	if cv.IsClaude() {
		return c.claudeHead(ctx, cv)
	}
	return readSessionHead(cv.Session)
}

// claudePins digests a Claude launch like pinsOf, with the session flag
// written one way: the first launch creates the session (--session-id)
// and every later one resumes it (--resume), which is the same session,
// not another engine.
func claudePins(cv *conversations.Conversation, spec engine.Spec) claims.Pins {
	args := slices.Clone(spec.Args)
	if i := slices.Index(args, "--resume"); i >= 0 {
		args[i] = "--session-id"
	}
	argv, _ := json.Marshal(args)
	sum := sha256.Sum256(argv)
	return claims.Pins{EngineVersion: cv.Claude.Version, BinarySHA256: cv.Claude.SHA256, ArgvDigest: hex.EncodeToString(sum[:])}
}

// claudeLoadCheck is K8 for Claude Code: the CLI answers initialize (its
// pending permission requests become decisions), and the transcript the
// binding names is still on the leaf the claim pinned, the one --resume
// continues. The CLI writes nothing before the first prompt, so the file
// is what it loaded. A new session must still have no transcript.
func (c *Controller) claudeLoadCheck(ctx context.Context, d engine.Driver, cv *conversations.Conversation, head sessionHead, expectLeaf string) (string, string, error) {
	in, err := driverAs[initializer](d, "initialize")
	if err != nil {
		return "", "", err
	}
	if _, err := in.Initialize(ctx); err != nil {
		return "", "", fmt.Errorf("initialize: %w", err)
	}
	now, err := c.loadedHead(ctx, cv, head)
	if errors.Is(err, errLoadedChanged) {
		return "", "", fmt.Errorf("the transcript of session %s %w", cv.Claude.Session, err)
	}
	if err != nil {
		return "", "", fmt.Errorf("read the transcript: %w", err)
	}
	want := head.leaf
	if expectLeaf != "" {
		want = expectLeaf
	}
	switch {
	case now.exists != head.exists:
		return "", "", fmt.Errorf("the transcript of session %s appeared or vanished during the launch", cv.Claude.Session)
	case now.leaf != want:
		return "", "", fmt.Errorf("the transcript's default leaf is %s, the pinned leaf is %s", now.leaf, want)
	}
	return cv.Claude.Session, now.leaf, nil
}
