package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/engine"
)

// pinEngine resolves the engine named by --engine (default: pi from PATH)
// and pins it: package version and SHA-256 of its entry file. A conversation without an engine can be observed
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
	pin, err := engine.Resolve(p)
	if err != nil {
		return fmt.Errorf("--engine %q: %w", p, err)
	}
	cv.Engine.Path = p
	cv.Engine.Version, cv.Engine.SHA256 = pin.Version, pin.SHA256
	cv.Engine.Entry, cv.Engine.PackageDir, cv.Engine.Node = pin.Entry, pin.PackageDir, pin.Node
	return nil
}
