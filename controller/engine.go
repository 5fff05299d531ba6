package controller

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/engine/claude"
	"github.com/mosaic-agents/mosaic/engine/pi"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/scopes"
)

// engineOf builds the conversation's engine, the seam the controller
// launches (Spec), opens (Open, with Options.Resume to re-attach) and
// reads the session of (History) through, from cv by its engine kind.
// Building it has no effect: the directories a launch prepares (Pi's
// agent directory, Claude's configuration directory) are made by spec,
// so a re-attach or a history read leaves them as the engine found them.
// What only one engine does beyond the seam is asked of its Driver with
// a type assertion (sessionProbe, initializer, resyncer, announcements).
func (c *Controller) engineOf(cv *conversations.Conversation) (engine.Engine, error) {
	if cv.IsClaude() {
		if cv.Claude == nil {
			return nil, protocol.Refuse(protocol.CodeConfiguration, "conversation %s names engine_kind claude but has no [claude] table", cv.ID)
		}
		dirs := conversations.ClaudeDirs(filepath.Dir(c.cfg.Claims.Root()), cv.ID)
		return claude.NewEngine(cv.ClaudeConfig(dirs, os.Environ())), nil
	}
	e := cv.Engine
	return pi.NewEngine(pi.Config{
		Pin:         pinOf(e),
		Seal:        pi.Seal{Session: cv.Session, Provider: e.Provider, Model: e.Model, Thinking: e.Thinking},
		AgentDir:    c.agentDirOf(cv),
		ProjectRoot: cv.Project,
		Extensions:  e.Pins(),
	}, os.Environ()), nil
}

// driverOptions are the Options of execution execID, whatever the kind.
func (c *Controller) driverOptions(execID string) engine.Options {
	return engine.Options{Execution: execID,
		CommandTimeout: c.cfg.CommandTimeout, AbortTimeout: c.cfg.AbortTimeout, StdinTimeout: c.cfg.EngineStdinTimeout,
		MaxLine: c.cfg.EngineMaxLine, LineLimit: c.cfg.EngineLineLimit, MaxQueued: c.cfg.EngineMaxQueued}
}

// openEngine wraps a started engine's pipes in its Driver, built by the
// conversation's own engine: a launch with driverOptions, a re-attach with
// reattachOptions.
func (c *Controller) openEngine(cv *conversations.Conversation, h *scopes.Handle, opts engine.Options) (engine.Driver, error) {
	eng, err := c.engineOf(cv)
	if err != nil {
		return nil, err
	}
	if f := c.test.openFault; f != nil {
		if err := f(); err != nil {
			return nil, err
		}
	}
	return eng.Open(h.Stdout, h.Stdin, opts)
}

// engineNameOf is the engine the binding names for cv.
func engineNameOf(cv *conversations.Conversation) string {
	switch {
	case cv.IsClaude():
		return "claude " + cv.Claude.Version
	case cv.Engine.Version == "":
		return "pi (test engine)"
	}
	return "pi " + cv.Engine.Version
}

// reattachOptions are the Options of a re-attach, the nth resume of
// execution execID: kept pipes read again from a line boundary, with
// sequence numbers and command ids no earlier controller used.
func (c *Controller) reattachOptions(execID string, n uint64) engine.Options {
	o := c.driverOptions(execID)
	o.Resume, o.SeqBase, o.IDPrefix = true, n<<32, fmt.Sprintf("r%d.", n)
	return o
}

// initializer is Claude Code's initialize: its load check (K8) asks it
// first, and the permission requests it names become decisions. Pi's
// load check is sessionProbe's get_state instead.
type initializer interface {
	Initialize(ctx context.Context) ([]engine.NativeDecision, error)
}

// claudeResyncer is Claude Code's re-attach on kept pipes: two
// initialize requests, the second answer naming the turn in progress and
// the pending permission requests.
type claudeResyncer interface {
	Resync(ctx context.Context, timeout time.Duration) (claude.Resumed, int64, error)
}

// piResyncer is Pi's re-attach on kept pipes: get_state after the first
// line boundary, naming the session file the engine holds.
type piResyncer interface {
	Resync(ctx context.Context, timeout time.Duration) (pi.State, int64, error)
}

// announcer hands what Claude Code's connection announced to the next
// controller at a restart, and takes what the previous one handed
// (handover.go).
type announcer interface {
	Latest(n int) []claude.Handed
	Seed([]claude.Handed)
	Announcing() <-chan struct{}
	LatestNotified(n int) []claude.Notice
	SeedNotified([]claude.Notice)
}

var (
	_ initializer    = (*claude.Conn)(nil)
	_ claudeResyncer = (*claude.Conn)(nil)
	_ announcements  = (*claude.Conn)(nil)
	_ announcer      = (*claude.Conn)(nil)
	_ piResyncer     = (*pi.Conn)(nil)
)

// errOtherKind is an engine-specific call asked of a Driver of another
// kind (the controller built the engine from the wrong kind).
var errOtherKind = errors.New("the engine is of another kind")

// driverAs returns d as the optional interface T, or errOtherKind naming
// what was asked.
func driverAs[T any](d engine.Driver, what string) (T, error) {
	t, ok := d.(T)
	if !ok {
		return t, fmt.Errorf("%s: %w", what, errOtherKind)
	}
	return t, nil
}
