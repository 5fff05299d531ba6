package pi

import (
	"context"
	"io"

	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/history"
)

// Engine is the Pi side of the engine seam: the launch (pin, extensions
// and seal, through Command), the session identity (the session file)
// and the history reader (history.Read, seen through Snapshot.Seam).
type Engine struct {
	cfg     Config
	environ []string
}

var _ engine.Engine = (*Engine)(nil)

// NewEngine returns the seam value for cfg; environ is the controller's
// environment, of which Command passes only the allowed names.
func NewEngine(cfg Config, environ []string) *Engine {
	return &Engine{cfg: cfg, environ: environ}
}

// Kind is engine.KindPi.
func (e *Engine) Kind() string { return engine.KindPi }

// CheckPin re-verifies the package tree and the interpreter (Check).
func (e *Engine) CheckPin(context.Context) error { return Check(e.cfg.Pin) }

// Spec is Command. resume changes nothing: --session continues the file
// when it exists and creates it otherwise.
func (e *Engine) Spec(context.Context, bool) (engine.Spec, error) {
	return Command(e.cfg, e.environ)
}

// SessionKey is the session file's path.
func (e *Engine) SessionKey() string { return e.cfg.Seal.Session }

// Open wraps a launched Pi's pipes in a Conn.
func (e *Engine) Open(r io.Reader, w io.WriteCloser, opts engine.Options) (engine.Driver, error) {
	c, err := New(r, w, opts)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// History reads the session file, and only that file (refusing one whose
// header names a directory outside the project).
func (e *Engine) History(context.Context) (engine.History, error) {
	s, err := history.Read(e.cfg.Seal.Session, history.Options{Project: e.cfg.ProjectRoot})
	if err != nil {
		return nil, err
	}
	return s.Seam(e.cfg.Seal.Session), nil
}
