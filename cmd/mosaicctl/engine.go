package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/mosaic-agents/mosaic/conversations"
)

// pinEngine resolves the engine named by --engine (default: pi from PATH)
// to an absolute path. A conversation without an engine can be observed
// but never launched, so a missing default is a warning, not a refusal.
func pinEngine(cv *conversations.Conversation, flag string) error {
	name := flag
	if name == "" {
		name = "pi"
	}
	p, err := exec.LookPath(name)
	if err != nil {
		if flag == "" && errors.Is(err, exec.ErrNotFound) {
			fmt.Fprintln(os.Stderr, "mosaicctl: warning: no pi on PATH; the conversation has no engine until you add it again with --engine PATH")
			return nil
		}
		return fmt.Errorf("--engine %q: %w", name, err)
	}
	if p, err = filepath.Abs(p); err != nil {
		return fmt.Errorf("--engine %q: %w", name, err)
	}
	cv.Engine.Path = p
	return nil
}
