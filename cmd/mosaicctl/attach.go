package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/mosaic-agents/mosaic/client"
	"github.com/urfave/cli/v2"
)

func attachCommand() *cli.Command {
	return &cli.Command{
		Name:      "attach",
		Usage:     "the mediated terminal: watch a conversation, take control, prompt, interrupt, force stop and recover",
		ArgsUsage: "ID",
		Description: "Connects as an observer (socket-activating the controller) and shows the transcript the client\n" +
			"library builds, live. Enter sends, Ctrl-J or Alt-Enter adds a newline, Ctrl-T takes control,\n" +
			"Ctrl-G interrupts, Ctrl-X force-stops and Ctrl-R recovers (each after a y/N confirmation that\n" +
			"shows what it acts on), PageUp/PageDown scroll (PageUp at the top reads older history), Ctrl-O\n" +
			"reconnects and re-reads, Ctrl-C or Ctrl-D quits. See docs/attach.md.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "socket", Usage: "connect to `PATH` instead of the conversation's socket"},
			&cli.DurationFlag{Name: "escape-timeout", Value: 50 * time.Millisecond,
				Usage: "how long a lone ESC or an unfinished escape sequence waits for the rest of its bytes (raise it on slow links)"},
		},
		Action: runAttach,
	}
}

func runAttach(c *cli.Context) error {
	id, err := idArg(c)
	if err != nil {
		return err
	}
	if err := requireTTY(); err != nil {
		return err
	}
	path, err := conversationSocket(c.Context, id, c.String("socket"))
	if err != nil {
		return err
	}
	// Connect before touching the terminal, so a refusal or a missing
	// socket is printed on the operator's ordinary screen.
	const dialLimit = 30 * time.Second
	dctx, cancel := context.WithTimeout(c.Context, dialLimit)
	cl, err := client.Dial(dctx, path, client.Options{Name: "mosaicctl attach/" + version, Runs: true})
	cancel()
	if err != nil {
		return dialError(c.Context, id, "attach "+id, err, dialLimit)
	}
	defer cl.Close()

	tty, err := openTTY()
	if err != nil {
		return err
	}
	defer tty.restore()
	defer tty.guard()

	ctx, stop := context.WithCancel(c.Context)
	defer stop()
	// SIGTERM, SIGHUP (the terminal went away), SIGINT and SIGQUIT sent by
	// kill end the loop, so the deferred restore runs.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	defer signal.Stop(winch)

	a := newAttacher(ctx, tty, cl, id, c.Duration("escape-timeout"))
	return a.run(sigs, winch)
}
