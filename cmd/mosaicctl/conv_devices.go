package main

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mosaic-agents/mosaic/internal/devices"
	"github.com/mosaic-agents/mosaic/protocol"
)

// deviceFlag is conv add's --device: the engine's /dev holds only the
// plain devices (docs/security.md, "devices"), so a tool that needs one
// of the machine's is given it here, by name, for every launch.
func deviceFlag() cli.Flag {
	return &cli.StringSliceFlag{Name: "device", Usage: "a host device `PATH` below /dev the engine's tools may open too (a GPU's /dev/dri/renderD128, /dev/kvm); repeatable; every tool of the conversation gets it (docs/security.md)"}
}

// devicesOf resolves each --device to the node it names (a udev link such
// as /dev/dri/by-path/…-render leads to it) and refuses what is no
// character device below /dev: the launch binds nodes, never links.
func devicesOf(c *cli.Context) ([]string, error) {
	var out []string
	for _, d := range c.StringSlice("device") {
		real, err := filepath.EvalSymlinks(d)
		if err != nil {
			return nil, protocol.Refuse(protocol.CodeUsage, "--device %s: %v; name a device node of this machine, such as /dev/dri/renderD128", d, err)
		}
		fi, err := os.Lstat(real)
		if err != nil || fi.Mode()&os.ModeCharDevice == 0 || !strings.HasPrefix(real, "/dev/") {
			return nil, protocol.Refuse(protocol.CodeUsage, "--device %s (%s) is no character device below /dev; name a device node, such as /dev/dri/renderD128", d, real)
		}
		out = append(out, real)
	}
	if _, err := devices.Check(out); err != nil {
		return nil, protocol.Refuse(protocol.CodeUsage, "--device: %v; name a device node other than the engine's own ptys, shared memory and queues", err)
	}
	return out, nil
}
