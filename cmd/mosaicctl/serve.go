package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/mosaic-agents/mosaic/activation"
	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/controller"
	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/scopes"
	"github.com/mosaic-agents/mosaic/units"
	"github.com/urfave/cli/v2"
)

// helloFirst bounds how long `serve` lets the first hello go before the
// controller's start-up.
const helloFirst = 100 * time.Millisecond

func serveCommand() *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "run a conversation's controller (what mosaic-conv@.service runs)",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "conversation", Usage: "conversation `ID`", Required: true},
			&cli.StringFlag{Name: "listen", Usage: "serve on `PATH` instead of the activated socket (development)"},
			&cli.IntFlag{Name: "max-line", Usage: "cap on one client line in `BYTES`", Value: protocol.MaxLine},
			&cli.IntFlag{Name: "max-conns", Usage: "cap on open connections (`N`; lowered to fit RLIMIT_NOFILE)", Value: controller.DefaultMaxConns},
			&cli.Int64Flag{Name: "max-buffered", Usage: "cap on `BYTES` of unfinished client lines across all connections", Value: controller.DefaultMaxBuffered},
			&cli.Int64Flag{Name: "max-queued", Usage: "cap on `BYTES` of replies queued for clients that do not read, across all connections", Value: controller.DefaultMaxQueued},
			&cli.DurationFlag{Name: "hello-timeout", Usage: "time from connect to a complete hello", Value: controller.DefaultHelloTimeout},
			&cli.DurationFlag{Name: "idle-timeout", Usage: "silence allowed before the hello", Value: controller.DefaultIdleTimeout},
			&cli.StringFlag{Name: "claim-root", Usage: "writer-claim `DIR` (default $XDG_STATE_HOME/mosaic/claims)"},
			&cli.DurationFlag{Name: "grace", Usage: "TERM phase of a force stop before the kill phase", Value: 3 * time.Second},
			&cli.BoolFlag{Name: "allow-pgroup", Usage: "without a user manager, run the engine in a process group (its stops can never be proven)"},
		},
		Action: func(c *cli.Context) error {
			id := c.String("conversation")
			log := audit.New(id)
			fail := func(err error) error {
				code := protocol.CodeOf(err)
				if code == "" {
					code = protocol.CodeServeFailed
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
			var kept map[string]*os.File
			var fdstore controller.FDStore
			if p := c.String("listen"); p != "" {
				l, err = activation.Listen(p)
			} else {
				// Under systemd: the conversation socket, and the engine
				// descriptors a previous controller kept in the fd store.
				l, kept, err = activation.Activated()
				if st := activation.NewFDStore(); st != nil {
					fdstore = countedStore{st, id}
				}
			}
			if err != nil {
				return fail(err)
			}
			ctx, stop := signal.NotifyContext(c.Context, syscall.SIGTERM, os.Interrupt)
			defer stop()
			root := c.String("claim-root")
			if root == "" {
				if root, err = claims.DefaultRoot(); err != nil {
					return fail(err)
				}
			}
			store, err := claims.Open(root)
			if err != nil {
				return fail(err)
			}
			mgr := scopes.NewManager(scopes.Config{Fallback: c.Bool("allow-pgroup")})
			defer mgr.Close()
			ctrl := controller.New(controller.Config{Conversation: cv, Claims: store, Scopes: mgr, Audit: log,
				Grace: c.Duration("grace"), Load: func() (*conversations.Conversation, error) { return s.Load(id) },
				FDStore: fdstore, Kept: kept})
			defer ctrl.Close()
			if c.Int("max-conns") < 1 || c.Int64("max-buffered") < int64(c.Int("max-line")) || c.Int64("max-queued") < 16<<20 || c.Duration("hello-timeout") <= 0 || c.Duration("idle-timeout") <= 0 {
				l.Close()
				return fail(protocol.Refuse(protocol.CodeConfiguration,
					"--max-conns must be at least 1, --max-buffered at least --max-line, --max-queued at least 16 MiB (a history page is up to 8 MiB), and the timeouts positive"))
			}
			conns, nofile := controller.ConnLimit(c.Int("max-conns"))
			// Serving starts before the engine does: the first client's
			// hello is answered at once, and its connection held until
			// Start has returned (controller.StartGate).
			started := controller.NewStartGate()
			srv := &controller.Server{Conversation: cv.ID, Version: "mosaic/" + version, UID: os.Getuid(),
				MaxLine: c.Int("max-line"), Audit: log, Controller: ctrl, Started: started,
				MaxConns: conns, MaxBuffered: c.Int64("max-buffered"), MaxQueued: c.Int64("max-queued"),
				HelloTimeout: c.Duration("hello-timeout"), IdleTimeout: c.Duration("idle-timeout")}
			// A hibernated conversation (the idle policy ended its engine
			// with a proof) needs no controller: exit, and the socket
			// starts the next one, which wakes it, on the next client.
			sctx, hibernate := context.WithCancel(ctx)
			defer hibernate()
			served := make(chan error, 1)
			go func() { served <- srv.Serve(sctx, l) }()
			// The connection that activated the socket is waiting: answer
			// its hello before the start-up takes the CPU (a moment at
			// most, so a connection that never says hello delays nothing).
			select {
			case <-started.Welcomed():
			case <-time.After(helloFirst):
			case <-ctx.Done():
			}
			if err := ctrl.Start(ctx); err != nil {
				started.Open(err)
				<-served
				return fail(err)
			}
			started.Open(nil)
			log.Log(audit.Entry{Event: audit.Start, Message: fmt.Sprintf("controller for %s serving on %s (project %s, seat %s); at most %d connections (RLIMIT_NOFILE %d)", cv.ID, l.Addr(), cv.Project, cv.Seat, conns, nofile),
				Fields: map[string]string{"MAX_CONNS": fmt.Sprint(conns), "NOFILE": fmt.Sprint(nofile)}})
			activation.Notify(fmt.Sprintf("READY=1\nSTATUS=serving conversation %s (seat %s, project %s)", cv.ID, cv.Seat, cv.Project))
			go func() {
				select {
				case <-ctrl.Hibernated():
					activation.Notify("STATUS=hibernated: the next client wakes the conversation")
					hibernate()
				case <-sctx.Done():
				}
			}()
			err = <-served
			if ctx.Err() != nil {
				// Told to exit: unless the manager restarts the service,
				// the engine's descriptors go with it, so the engine is
				// ended with a proof first (controller/shutdown.go); a
				// restart hands what the controller vouched for to the
				// next one (controller/handover.go).
				if why, forGood := ending(log, id, fdstore != nil); forGood {
					activation.Notify(fmt.Sprintf("STATUS=stopping: ending the engine with a proof (%s)\nEXTEND_TIMEOUT_USEC=%d",
						why, ctrl.ShutdownBound().Microseconds()))
					ctrl.Shutdown(why)
				} else {
					ctrl.Handover()
				}
			}
			activation.Notify("STOPPING=1")
			log.Log(audit.Entry{Event: audit.Stop, Message: fmt.Sprintf("controller for %s stopped", cv.ID)})
			return err
		},
	}
}

// ending says whether the controller exits for good, and why. Without
// systemd it always does (no fd store keeps the engine's descriptors);
// under it, unless the manager is restarting the service. A manager that
// cannot be asked leaves the engine as a restart would: the one promise a
// restart makes is that the engine is not touched.
func ending(log *audit.Logger, id string, managed bool) (string, bool) {
	if !managed {
		return "the controller is exiting", true
	}
	ctx, cancel := context.WithTimeout(context.Background(), endingTimeout)
	defer cancel()
	e, err := units.ServiceEnding(ctx, id)
	switch {
	case err != nil:
		log.Log(audit.Entry{Event: audit.Transition, Message: fmt.Sprintf("told to exit, and the user manager cannot say whether it restarts the service (%v): the engine is left as for a restart", err)})
		return "", false
	case e.Restart:
		return "", false
	case e.Job == "":
		return "the controller was signalled outside a job of its service, which then ends", true
	}
	return "its service is stopping (" + e.Job + " job)", true
}

// endingTimeout bounds the question to the manager: the service's
// TimeoutStopSec (10 s) holds the stop that may follow too.
const endingTimeout = 2 * time.Second

// countedStore is the service's fd store, which counts what it holds
// (controller's storeCounter): once the manager has processed every
// request sent before, the service's NFileDescriptorStore.
type countedStore struct {
	*activation.FDStore
	id string
}

func (s countedStore) Held(ctx context.Context) (held, max int, err error) {
	if err := s.Barrier(ctx); err != nil {
		return 0, 0, err
	}
	return units.StoredFDs(ctx, s.id)
}
