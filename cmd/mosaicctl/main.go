// Command mosaicctl installs, runs and drives mosaic conversations: one
// controller process per conversation, socket-activated by systemd.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/scopes"
	"github.com/urfave/cli/v2"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

func main() {
	// The scope launcher re-executes this binary as a held child and an
	// anchor; those never reach the CLI.
	scopes.MaybeRunHeld()
	app := &cli.App{
		Name:    "mosaicctl",
		Usage:   "systemd-native controller for coding-agent conversations",
		Version: version,
		Commands: []*cli.Command{
			installCommand(),
			uninstallCommand(),
			convCommand(),
			serveCommand(),
			helloCommand(),
			attachCommand(),
			promptCommand(),
			interruptCommand(),
			stopCommand(),
			recoverCommand(),
			statusCommand(),
			proofCommand(),
			auditCommand(),
			doctorCommand(),
		},
		// Errors are printed once, by main, with their refusal code.
		ExitErrHandler: func(*cli.Context, error) {},
	}
	if err := app.Run(os.Args); err != nil {
		os.Exit(report(err))
	}
}

// report prints err and returns the exit status: 2 for a refusal (its code
// first, so scripts can match it), 1 for anything else.
func report(err error) int {
	var r *protocol.Refusal
	if errors.As(err, &r) {
		fmt.Fprintf(os.Stderr, "mosaicctl: %s: %s\n", r.Code, r.Message)
		return 2
	}
	fmt.Fprintf(os.Stderr, "mosaicctl: %v\n", err)
	return 1
}
