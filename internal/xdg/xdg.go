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

// Base is one XDG base directory: its variable and its default under
// $HOME.
type Base struct {
	Env      string // XDG_CONFIG_HOME
	Fallback string // .config, relative to $HOME
	what     string
}

// The base directories mosaic keeps its files under.
var (
	Config = Base{Env: "XDG_CONFIG_HOME", Fallback: ".config", what: "config"}
	State  = Base{Env: "XDG_STATE_HOME", Fallback: filepath.Join(".local", "state"), what: "state"}
	Data   = Base{Env: "XDG_DATA_HOME", Fallback: filepath.Join(".local", "share"), what: "data"}
)

// In resolves b as a process whose environment getenv reads does: the
// user manager's environment, say, which is what the controllers get and
// may not be this process's.
func (b Base) In(getenv func(string) string) (string, error) {
	if d := getenv(b.Env); filepath.IsAbs(d) {
		return filepath.Clean(d), nil
	}
	h := getenv("HOME")
	if !filepath.IsAbs(h) {
		return "", fmt.Errorf("find the %s directory: $%s is unset and $HOME is %q, not an absolute path", b.what, b.Env, h)
	}
	return filepath.Join(h, b.Fallback), nil
}

// ConfigHome returns $XDG_CONFIG_HOME, or ~/.config when it is unset or
// relative.
func ConfigHome() (string, error) { return home(Config) }

// StateHome returns $XDG_STATE_HOME, or ~/.local/state when it is unset or
// relative.
func StateHome() (string, error) { return home(State) }

// DataHome returns $XDG_DATA_HOME, or ~/.local/share when it is unset or
// relative.
func DataHome() (string, error) { return home(Data) }

// RuntimeDir returns $XDG_RUNTIME_DIR. The spec gives it no fallback:
// pam_systemd (logind) creates it at login as /run/user/<uid>.
func RuntimeDir() (string, error) {
	if d := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(d) {
		return d, nil
	}
	return "", ErrNoRuntimeDir
}

func home(b Base) (string, error) {
	if d := os.Getenv(b.Env); filepath.IsAbs(d) {
		return d, nil
	}
	h, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find the %s directory: %w", b.what, err)
	}
	return filepath.Join(h, b.Fallback), nil
}
