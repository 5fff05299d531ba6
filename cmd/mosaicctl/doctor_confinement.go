package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/mosaic-agents/mosaic/internal/xdg"
	"github.com/mosaic-agents/mosaic/scopes"
)

// checkConfinement sets up an engine's confinement in a throwaway child,
// exactly as a launch does.
func checkConfinement(ctx context.Context) (string, error) {
	c, err := scopes.ProbeConfinement(ctx)
	if err != nil {
		return "", err
	}
	var ns []string
	for _, n := range c.Namespaces {
		ns = append(ns, n.Type)
	}
	if links := replaceableLinks(); len(links) > 0 {
		return "", warnf("replace each link with the directory it points to (move the directory there), or with a bind mount",
			"%s: a symbolic link an engine can point elsewhere, and mosaic's state, the user manager's units and the models.json other conversations are given would be read from its tree, masks notwithstanding", strings.Join(links, ", "))
	}
	return fmt.Sprintf("engines run in their own %s namespaces; masked %s; %s", strings.Join(ns, ", "), strings.Join(c.Masked, " "), c.ScopeNote()), nil
}

// replaceableLinks are the symbolic links on the way to the directories
// whose masks guard mosaic's state and what the session runs later, and
// to Pi's agent directory, read-only in every engine for the models.json
// other conversations are given.
func replaceableLinks() []string {
	dirs := scopes.SessionDirs()
	for _, home := range []func() (string, error){xdg.ConfigHome, xdg.StateHome, xdg.DataHome} {
		if d, err := home(); err == nil {
			dirs = append(dirs, filepath.Join(d, "mosaic"))
		}
	}
	if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(home, ".pi", "agent"))
	}
	return scopes.ReplaceableLinks(dirs...)
}
