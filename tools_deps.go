//go:build tools

package mosaic

import (
	_ "github.com/BurntSushi/toml"
	_ "github.com/coreos/go-systemd/v22/activation"
	_ "github.com/coreos/go-systemd/v22/daemon"
	_ "github.com/coreos/go-systemd/v22/dbus"
	_ "github.com/coreos/go-systemd/v22/journal"
	_ "github.com/godbus/dbus/v5"
	_ "github.com/urfave/cli/v2"
	_ "golang.org/x/sys/unix"
	_ "golang.org/x/term"
)
