package conversations

import (
	"path/filepath"

	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/engine/claude"
	hclaude "github.com/mosaic-agents/mosaic/history/claude"
	"github.com/mosaic-agents/mosaic/internal/xdg"
	"github.com/mosaic-agents/mosaic/protocol"
)

// Claude is a Claude Code conversation's engine ([claude] in its file):
// the pinned binary, the session UUID the controller chose or adopted,
// the model and the env file holding the credentials. The [engine] table
// (Pi's) stays empty for such a conversation and the top-level session
// (Pi's file) is empty: Claude's session is a UUID, its transcript lives
// in the controller-owned config directory (ClaudeDirs).
type Claude struct {
	// Path, Version and SHA256 pin the native binary (claude.Resolve);
	// a launch whose binary no longer matches refuses engine-pin-mismatch.
	Path    string `toml:"path"`
	Version string `toml:"version"`
	SHA256  string `toml:"sha256"`
	// Session is the session UUID: the claim's session key, the
	// transcript's file name, --session-id at the first launch and
	// --resume after.
	Session string `toml:"session"`
	// Adopted says the session existed at conv add (--resume-session):
	// even the first launch resumes it.
	Adopted bool   `toml:"adopted,omitempty"`
	Model   string `toml:"model,omitempty"`
	// EnvFile holds ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN and
	// ANTHROPIC_BASE_URL (0600, the user's); read again at every launch,
	// so a rotated key needs no conv add. Empty: none of them is set.
	EnvFile string `toml:"env_file,omitempty"`
}

// Kind returns the conversation's engine kind: engine.KindPi unless
// engine_kind says claude.
func (c *Conversation) Kind() string {
	if c.EngineKind == "" {
		return engine.KindPi
	}
	return c.EngineKind
}

// IsClaude reports whether c runs Claude Code.
func (c *Conversation) IsClaude() bool { return c.Kind() == engine.KindClaude }

// SessionKey is the claim's session key: Pi's session file, Claude's
// session UUID.
func (c *Conversation) SessionKey() string {
	if c.IsClaude() && c.Claude != nil {
		return c.Claude.Session
	}
	return c.Session
}

// ClaudeDirs returns the controller-owned directories of Claude
// conversation id under mosaic's state directory (the claim root's
// parent): STATE/claude/ID/config (CLAUDE_CONFIG_DIR: settings and the
// transcripts) and STATE/claude/ID/tmp. They are the controller's, not the
// user's ~/.claude: nothing the user configured there widens the seal.
func ClaudeDirs(state, id string) claude.Dirs {
	base := filepath.Join(state, "claude", id)
	return claude.Dirs{Config: filepath.Join(base, "config"), Tmp: filepath.Join(base, "tmp")}
}

// ClaudeConfig is the engine/claude configuration of c: its pin, session,
// model and env file, the project as the engine's directory, dirs as the
// controller-owned directories and environ the controller's environment
// (of which only the allow-listed names pass).
func (c *Conversation) ClaudeConfig(dirs claude.Dirs, environ []string) claude.Config {
	cl := c.Claude
	if cl == nil {
		cl = &Claude{}
	}
	return claude.Config{
		Pin:     claude.Pin{Path: cl.Path, Version: cl.Version, SHA256: cl.SHA256},
		Session: cl.Session, Model: cl.Model, EnvFile: cl.EnvFile,
		ProjectRoot: c.Project, Dirs: dirs, Environ: environ,
	}
}

// validateKind checks the engine kind and, for Claude, the [claude]
// table; Pi's own fields must then be empty, so no Pi setting is silently
// ignored.
func (c *Conversation) validateKind() error {
	switch c.EngineKind {
	case "", engine.KindPi:
		if c.Claude != nil {
			return refuseField("claude", c.Claude.Session, "a [claude] table needs engine_kind = \"claude\"")
		}
		return nil
	case engine.KindClaude:
	default:
		return refuseField("engine_kind", c.EngineKind, "must be pi or claude")
	}
	cl := c.Claude
	if cl == nil {
		return refuseField("claude", "", "engine_kind claude needs a [claude] table; add the conversation again with --engine-kind claude")
	}
	if c.Session != "" {
		return refuseField("session", c.Session, "a Claude conversation has no session file (the controller chooses the session UUID; --resume-session UUID adopts one)")
	}
	if !c.Engine.zero() {
		return refuseField("engine", c.Engine.Path, "Pi's [engine] settings do not apply to a Claude conversation; remove them")
	}
	if !claude.ValidSession(cl.Session) {
		return refuseField("claude.session", cl.Session, "must be a lowercase session UUID")
	}
	if want := ID(c.Project, c.Seat, cl.Session); c.ID != want {
		return refuseField("id", c.ID, "does not match the project, seat and session ("+want+"); re-add the conversation")
	}
	if cl.Path != "" && (!filepath.IsAbs(cl.Path) || filepath.Clean(cl.Path) != cl.Path) {
		return refuseField("claude.path", cl.Path, "must be a clean absolute path")
	}
	if cl.SHA256 != "" && !validSHA256(cl.SHA256) {
		return refuseField("claude.sha256", cl.SHA256, "must be 64 lowercase hex digits; add the conversation again")
	}
	if cl.EnvFile != "" && (!filepath.IsAbs(cl.EnvFile) || filepath.Clean(cl.EnvFile) != cl.EnvFile) {
		return refuseField("claude.env_file", cl.EnvFile, "must be a clean absolute path")
	}
	if cl.Model != "" {
		if _, err := (claude.Seal{Session: cl.Session, Model: cl.Model}).Args(); err != nil {
			return protocol.Wrap(protocol.CodeConfiguration, err, "claude.model %q", cl.Model)
		}
	}
	return nil
}

func (e Engine) zero() bool {
	return e.Path == "" && e.Version == "" && e.SHA256 == "" && e.Entry == "" && e.PackageDir == "" &&
		e.PackageDigest == "" && e.Node == "" && e.NodeVersion == "" && e.NodeSHA256 == "" &&
		e.Provider == "" && e.Model == "" && e.Thinking == "" && e.AgentDir == "" && len(e.Extensions) == 0
}

// checkClaudeFiles checks what a Claude conversation names on disk at
// conv add: the env file loads (0600, the user's, no symlink, only
// allow-listed names: else env-file), and an adopted session's
// transcript exists in the conversation's own config directory and reads
// cleanly (the pinned version, the project's entries only). The user's
// ~/.claude is never read: a session from there is adopted by copying
// its file to the path the refusal names.
func (c *Conversation) checkClaudeFiles() error {
	if c.Claude.EnvFile != "" {
		if _, err := claude.LoadEnvFile(c.Claude.EnvFile); err != nil {
			return err
		}
	}
	if !c.Claude.Adopted {
		return nil
	}
	state, err := StateDir()
	if err != nil {
		return err
	}
	ref := hclaude.Ref{ConfigDir: ClaudeDirs(state, c.ID).Config, Project: c.Project, Session: c.Claude.Session}
	t, err := hclaude.Read(ref)
	if err != nil {
		return err
	}
	if t.New() {
		return protocol.Refuse(protocol.CodeConfiguration,
			"--resume-session %s: no transcript at %s; copy the session's transcript there (mosaic never reads ~/.claude) or add the conversation without --resume-session", c.Claude.Session, t.Path())
	}
	return nil
}

// StateDir is mosaic's state directory, $XDG_STATE_HOME/mosaic (the
// claim root's parent, claims.DefaultRoot).
func StateDir() (string, error) {
	base, err := xdg.StateHome()
	if err != nil {
		return "", err
	}
	return filepath.Join(base, "mosaic"), nil
}
