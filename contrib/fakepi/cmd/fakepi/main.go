// Command fakepi is a stand-in for the pinned Pi 0.85.1 in `--mode rpc`,
// for tests: see package github.com/mosaic-agents/mosaic/contrib/fakepi.
package main

import (
	"context"
	"os"

	"github.com/mosaic-agents/mosaic/contrib/fakepi"
)

func main() { os.Exit(fakepi.Run(context.Background())) }
