package units

import (
	"context"
	"fmt"
	"strings"

	sd "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"

	"github.com/mosaic-agents/mosaic/internal/userbus"
)

// ManagerView is what the user manager itself works with, which a
// mosaicctl started from a shell need not share: the shell's rc file can
// export XDG_CONFIG_HOME or XDG_STATE_HOME the manager never sees.
type ManagerView struct {
	// UnitPath is where the manager reads unit files, first first.
	UnitPath []string
	// Environment is what the manager gives the units it starts: the
	// controllers' environment.
	Environment []string
}

// ReadManagerView asks the user manager for its view.
func ReadManagerView(ctx context.Context) (ManagerView, error) {
	var v ManagerView
	err := userbus.Default().Do(ctx, func(c *sd.Conn) error {
		var err error
		if v.UnitPath, err = ManagerStrings(c, "UnitPath"); err != nil {
			return err
		}
		v.Environment, err = ManagerStrings(c, "Environment")
		return err
	})
	return v, err
}

// ManagerStrings reads a string-array property of the manager object.
func ManagerStrings(c *sd.Conn, name string) ([]string, error) {
	text, err := c.GetManagerProperty(name)
	if err != nil {
		return nil, fmt.Errorf("read the user manager's %s: %w", name, err)
	}
	// go-systemd hands the variant back in its text form.
	v, err := dbus.ParseVariant(text, dbus.Signature{})
	if err != nil {
		return nil, fmt.Errorf("read the user manager's %s: %w", name, err)
	}
	ss, ok := v.Value().([]string)
	if !ok {
		return nil, fmt.Errorf("read the user manager's %s: a %s, not a list of strings", name, v.Signature())
	}
	return ss, nil
}

// Getenv looks name up in an environment list (NAME=value entries) as
// os.Getenv does in the process's own.
func Getenv(env []string) func(string) string {
	return func(name string) string {
		for i := len(env) - 1; i >= 0; i-- {
			if k, v, ok := strings.Cut(env[i], "="); ok && k == name {
				return v
			}
		}
		return ""
	}
}

// Loaded is where the user manager found a unit.
type Loaded struct {
	LoadState    string // loaded, not-found, bad-setting, masked, ...
	FragmentPath string // "" when it found no file
}

// LoadedUnit asks the user manager where it loads unit name from; asking
// loads it, as `systemctl --user show` does.
func LoadedUnit(ctx context.Context, name string) (Loaded, error) {
	var l Loaded
	err := userbus.Default().Do(ctx, func(c *sd.Conn) error {
		var err error
		if l.LoadState, err = unitString(ctx, c, name, "LoadState"); err != nil {
			return err
		}
		l.FragmentPath, err = unitString(ctx, c, name, "FragmentPath")
		return err
	})
	return l, err
}

func unitString(ctx context.Context, c *sd.Conn, unit, name string) (string, error) {
	p, err := c.GetUnitPropertyContext(ctx, unit, name)
	if err != nil {
		return "", fmt.Errorf("read %s's %s: %w", unit, name, err)
	}
	s, ok := p.Value.Value().(string)
	if !ok {
		return "", fmt.Errorf("read %s's %s: a %s, not a string", unit, name, p.Value.Signature())
	}
	return s, nil
}
