// Package xdg resolves the XDG base directories mosaic reads and writes
// under. The base directory spec says a relative value is invalid and is
// ignored, so each resolver takes only an absolute one.
package xdg

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ErrNoRuntimeDir means $XDG_RUNTIME_DIR is unset (or relative): the user
// has no runtime directory, and so no user bus and no conversation sockets.
var ErrNoRuntimeDir = errors.New("XDG_RUNTIME_DIR is not set")

// ConfigHome returns $XDG_CONFIG_HOME, or ~/.config when it is unset or
// relative.
func ConfigHome() (string, error) {
	return home("XDG_CONFIG_HOME", ".config", "config")
}

// StateHome returns $XDG_STATE_HOME, or ~/.local/state when it is unset or
// relative.
func StateHome() (string, error) {
	return home("XDG_STATE_HOME", filepath.Join(".local", "state"), "state")
}

// DataHome returns $XDG_DATA_HOME, or ~/.local/share when it is unset or
// relative.
func DataHome() (string, error) {
	return home("XDG_DATA_HOME", filepath.Join(".local", "share"), "data")
}

// RuntimeDir returns $XDG_RUNTIME_DIR. The spec gives it no fallback:
// pam_systemd (logind) creates it at login as /run/user/<uid>.
func RuntimeDir() (string, error) {
	if d := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(d) {
		return d, nil
	}
	return "", ErrNoRuntimeDir
}

func home(env, fallback, what string) (string, error) {
	if d := os.Getenv(env); filepath.IsAbs(d) {
		return d, nil
	}
	h, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find the %s directory: %w", what, err)
	}
	return filepath.Join(h, fallback), nil
}
