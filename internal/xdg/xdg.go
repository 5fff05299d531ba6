// Package xdg resolves the XDG base directories mosaic writes under.
package xdg

import (
	"fmt"
	"os"
	"path/filepath"
)

// ConfigHome returns $XDG_CONFIG_HOME, or ~/.config when it is unset or
// relative (the base directory spec says to ignore a relative value).
func ConfigHome() (string, error) {
	if d := os.Getenv("XDG_CONFIG_HOME"); filepath.IsAbs(d) {
		return d, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find the config directory: %w", err)
	}
	return filepath.Join(home, ".config"), nil
}
