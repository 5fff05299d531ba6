package main

import (
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/mosaic-agents/mosaic/activation"
	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/controller"
	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/urfave/cli/v2"
)

func serveCommand() *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "run a conversation's controller (what mosaic-conv@.service runs)",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "conversation", Usage: "conversation `ID`", Required: true},
			&cli.StringFlag{Name: "listen", Usage: "serve on `PATH` instead of the activated socket (development)"},
			&cli.IntFlag{Name: "max-line", Usage: "cap on one client line in `BYTES`", Value: protocol.MaxLine},
		},
		Action: func(c *cli.Context) error {
			id := c.String("conversation")
			log := audit.New(id)
			fail := func(err error) error {
				code := protocol.CodeOf(err)
				if code == "" {
					code = "serve-failed"
				}
				log.Log(audit.Entry{Event: audit.Refusal, Refusal: code, Message: fmt.Sprintf("controller for %s not started: %v", id, err)})
				activation.Notify(fmt.Sprintf("STATUS=not serving: %v", err))
				return err
			}
			s, err := conversations.Open()
			if err != nil {
				return fail(err)
			}
			cv, err := s.Load(id)
			if err != nil {
				return fail(err)
			}
			var l net.Listener
			if p := c.String("listen"); p != "" {
				l, err = activation.Listen(p)
			} else {
				l, err = activation.Listener()
			}
			if err != nil {
				return fail(err)
			}
			ctx, stop := signal.NotifyContext(c.Context, syscall.SIGTERM, os.Interrupt)
			defer stop()
			srv := &controller.Server{Conversation: cv.ID, Version: "mosaic/" + version, UID: os.Getuid(),
				MaxLine: c.Int("max-line"), Audit: log}
			log.Log(audit.Entry{Event: audit.Start, Message: fmt.Sprintf("controller for %s serving on %s (project %s, seat %s)", cv.ID, l.Addr(), cv.Project, cv.Seat)})
			activation.Notify(fmt.Sprintf("READY=1\nSTATUS=serving conversation %s (seat %s, project %s)", cv.ID, cv.Seat, cv.Project))
			err = srv.Serve(ctx, l)
			activation.Notify("STOPPING=1")
			log.Log(audit.Entry{Event: audit.Stop, Message: fmt.Sprintf("controller for %s stopped", cv.ID)})
			return err
		},
	}
}
