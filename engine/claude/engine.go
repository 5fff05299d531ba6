package claude

import (
	"context"
	"io"
	"path/filepath"

	"github.com/mosaic-agents/mosaic/engine"
	hclaude "github.com/mosaic-agents/mosaic/history/claude"
)

// Config is a Claude conversation's engine configuration.
type Config struct {
	Pin Pin
	// Session is the session UUID the controller chose (conv add) or
	// adopted (--resume-session); the claim's session key.
	Session string
	// Model is the optional --model value.
	Model string
	// ProjectRoot is the engine's working directory (it selects the
	// transcript's project slug).
	ProjectRoot string
	// Dirs are the controller-owned directories.
	Dirs Dirs
	// EnvFile is the optional env file (API key, base URL); read at each
	// Spec, so a rotated key needs no conv add.
	EnvFile string
	// Environ is the controller's environment; only the passed names of
	// it reach the engine.
	Environ []string
}

// Command checks the pin and the seal and returns the Spec for cfg:
// the pinned binary itself, the allow-listed argv (--resume when resume
// is set, else --session-id), the sealed environment and the project
// directory.
func Command(cfg Config, resume bool) (engine.Spec, error) {
	if err := Check(cfg.Pin); err != nil {
		return engine.Spec{}, err
	}
	args, err := Seal{Session: cfg.Session, Resume: resume, Model: cfg.Model}.Args()
	if err != nil {
		return engine.Spec{}, err
	}
	if !filepath.IsAbs(cfg.ProjectRoot) {
		return engine.Spec{}, unsealed("project root %q is not absolute", cfg.ProjectRoot)
	}
	var file map[string]string
	if cfg.EnvFile != "" {
		if file, err = LoadEnvFile(cfg.EnvFile); err != nil {
			return engine.Spec{}, err
		}
	}
	env, err := Environ(cfg.Environ, cfg.Dirs, file)
	if err != nil {
		return engine.Spec{}, err
	}
	return engine.Spec{
		Path: cfg.Pin.Path,
		Args: append([]string{cfg.Pin.Path}, args...),
		Env:  env,
		Dir:  cfg.ProjectRoot,
	}, nil
}

// Engine is the Claude Code side of the engine seam.
type Engine struct{ cfg Config }

var _ engine.Engine = (*Engine)(nil)

// NewEngine returns the seam value for cfg.
func NewEngine(cfg Config) *Engine { return &Engine{cfg: cfg} }

// Kind is engine.KindClaude.
func (e *Engine) Kind() string { return engine.KindClaude }

// CheckPin re-hashes the pinned binary.
func (e *Engine) CheckPin(context.Context) error { return Check(e.cfg.Pin) }

// Spec is Command.
func (e *Engine) Spec(_ context.Context, resume bool) (engine.Spec, error) {
	return Command(e.cfg, resume)
}

// SessionKey is the session UUID.
func (e *Engine) SessionKey() string { return e.cfg.Session }

// Open wraps a launched CLI's pipes.
func (e *Engine) Open(r io.Reader, w io.WriteCloser, opts engine.Options) (engine.Driver, error) {
	return New(r, w, e.cfg.Session, opts)
}

// History reads the session's transcript, and only that file.
func (e *Engine) History(context.Context) (engine.History, error) {
	return hclaude.Read(hclaude.Ref{ConfigDir: e.cfg.Dirs.Config, Project: e.cfg.ProjectRoot, Session: e.cfg.Session})
}
