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

func main() {
	// The scope launcher re-executes this binary as a held child and an
	// anchor; those never reach the CLI.
	scopes.MaybeRunHeld()
	app := newApp()
	argv, err := interspersed(app, os.Args)
	if err == nil {
		err = app.Run(argv)
	}
	if err != nil {
		os.Exit(report(err))
	}
}

// newApp is the command tree, strict about its command lines (usage.go).
func newApp() *cli.App {
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
			approveCommand(),
			queueCommand(),
			stopCommand(),
			recoverCommand(),
			statusCommand(),
			proofCommand(),
			auditCommand(),
			doctorCommand(),
			genCommand(),
			webCommand(),
		},
		// Errors are printed once, by main, with their refusal code.
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return usageError("%v; see `mosaicctl --help`", err)
		},
	}
	// `mosaicctl help NAME` of an unknown NAME: one line, not "No help topic".
	app.CommandNotFound = func(c *cli.Context, name string) {
		fmt.Fprintf(os.Stderr, "mosaicctl: %s: unknown command %q; see `mosaicctl --help`\n", protocol.CodeUsage, name)
		os.Exit(2)
	}
	strict(app.Commands, "mosaicctl")
	return app
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
