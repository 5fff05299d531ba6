package main

import (
	"fmt"
	"os"
	"sync"

	"golang.org/x/term"

	"github.com/mosaic-agents/mosaic/protocol"
)

// Terminal modes attach sets and clears: the alternate screen (the
// operator's scrollback is left as it was), bracketed paste (mode 2004:
// a paste arrives between ESC [200~ and ESC [201~, so it is inserted
// literally and never submits), and no autowrap (a line the width
// estimate got wrong is cut by the terminal instead of pushing the frame
// down).
const (
	ttyEnter = "\x1b[?1049h\x1b[?2004h\x1b[?7l\x1b[H\x1b[2J"
	ttyLeave = "\x1b[0m\x1b[?2004l\x1b[?7h\x1b[?25h\x1b[?1049l"
)

// attachTTY is the operator's terminal in raw mode. restore puts it back
// exactly once, whichever exit path gets there first: a return, a signal
// or a panic in any goroutine (guard).
type attachTTY struct {
	in, out *os.File
	old     *term.State
	once    sync.Once
}

// requireTTY refuses an attach whose stdin or stdout is not a terminal,
// before it dials: scripts use the one-shot verbs.
func requireTTY() error {
	if !term.IsTerminal(int(os.Stdin.Fd())) || !term.IsTerminal(int(os.Stdout.Fd())) {
		return protocol.Refuse(protocol.CodeUsage, "attach needs a terminal on stdin and stdout; scripts use prompt, interrupt, stop, recover, status and history")
	}
	return nil
}

// openTTY puts stdin in raw mode and switches the screen (requireTTY
// said both are terminals).
func openTTY() (*attachTTY, error) {
	in, out := os.Stdin, os.Stdout
	old, err := term.MakeRaw(int(in.Fd()))
	if err != nil {
		return nil, fmt.Errorf("raw mode on %s: %w", in.Name(), err)
	}
	t := &attachTTY{in: in, out: out, old: old}
	if _, err := out.WriteString(ttyEnter); err != nil {
		t.restore()
		return nil, fmt.Errorf("set up the screen: %w", err)
	}
	return t, nil
}

// size returns the terminal's columns and rows (80x24 when unknown).
func (t *attachTTY) size() (int, int) {
	w, h, err := term.GetSize(int(t.out.Fd()))
	if err != nil || w <= 0 || h <= 0 {
		return 80, 24
	}
	return w, h
}

// restore leaves the alternate screen, turns bracketed paste off and
// restores the saved terminal modes. It is safe to call more than once.
func (t *attachTTY) restore() {
	t.once.Do(func() {
		t.out.WriteString(ttyLeave)
		term.Restore(int(t.in.Fd()), t.old)
	})
}

// guard restores the terminal before a panic goes on: deferred first in
// every goroutine attach starts, so a crash never leaves the operator's
// terminal raw.
func (t *attachTTY) guard() {
	if r := recover(); r != nil {
		t.restore()
		panic(r)
	}
}
