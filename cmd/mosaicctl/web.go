package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	sdact "github.com/coreos/go-systemd/v22/activation"
	sd "github.com/coreos/go-systemd/v22/dbus"
	"github.com/mosaic-agents/mosaic/activation"
	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/internal/userbus"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/terminal"
	"github.com/mosaic-agents/mosaic/units"
	"github.com/mosaic-agents/mosaic/web"
	"github.com/urfave/cli/v2"
)

// webDefaultAddr is where mosaic-web.socket listens unless overridden.
const webDefaultAddr = "127.0.0.1:7433"

func webCommand() *cli.Command {
	store := func() cli.Flag {
		return &cli.StringFlag{Name: "store", Usage: "session store `DIR` (default $XDG_RUNTIME_DIR/mosaic/web)"}
	}
	return &cli.Command{
		Name:  "web",
		Usage: "print a one-time login link to the web surface (and open a browser when there is one)",
		Description: "Starts mosaic-web.socket when it is not started and prints http://HOST:PORT/login?token=...:\n" +
			"the token works once, for " + web.TokenTTL.String() + ", and is exchanged for an HttpOnly, SameSite=Strict\n" +
			"session cookie. From another machine, forward the port first (docs/web.md).",
		Flags: []cli.Flag{store(),
			&cli.StringFlag{Name: "addr", Usage: "the `HOST:PORT` the link names (default: read from mosaic-web.socket)"},
			&cli.BoolFlag{Name: "no-browser", Usage: "only print the link"},
		},
		Action: runWeb,
		Subcommands: []*cli.Command{
			{
				Name:  "serve",
				Usage: "run the web server (what mosaic-web.service runs)",
				Flags: []cli.Flag{store(),
					&cli.StringFlag{Name: "listen", Usage: "listen on `HOST:PORT` instead of the activated sockets (development)"},
					&cli.StringSliceFlag{Name: "allow-host", Usage: "also answer to `HOST[:PORT]` (the name a proxy forwards)"},
					&cli.DurationFlag{Name: "idle", Usage: "exit after `DURATION` with no browser attached (0: never)"},
				},
				Action: runWebServe,
			},
			{
				Name:   "sessions",
				Usage:  "list the browser sessions",
				Flags:  []cli.Flag{store()},
				Action: runWebSessions,
			},
			{
				Name:      "revoke",
				Usage:     "end a browser session (or `all`): its cookie is refused from the next request on",
				ArgsUsage: "ID|all",
				Flags:     []cli.Flag{store()},
				Action:    runWebRevoke,
			},
		},
	}
}

func webStore(c *cli.Context) (*web.Store, error) {
	dir := c.String("store")
	if dir == "" {
		d, err := web.DefaultStoreDir()
		if err != nil {
			return nil, err
		}
		dir = d
	}
	return &web.Store{Dir: dir}, nil
}

func runWeb(c *cli.Context) error {
	if c.NArg() > 0 {
		return usageError("`mosaicctl web` takes no arguments (did you mean `web sessions` or `web revoke ID`?)")
	}
	st, err := webStore(c)
	if err != nil {
		return err
	}
	addr := c.String("addr")
	if addr == "" {
		ctx, cancel := context.WithTimeout(c.Context, 30*time.Second)
		defer cancel()
		if addr, err = webAddr(ctx); err != nil {
			return err
		}
	}
	tok, err := st.NewToken()
	if err != nil {
		return err
	}
	url := "http://" + addr + "/login?token=" + tok
	fmt.Println(url)
	fmt.Fprintf(os.Stderr, "mosaicctl: the link works once, for %s; `mosaicctl web sessions` lists logins\n", web.TokenTTL)
	if !c.Bool("no-browser") && (os.Getenv("DISPLAY") != "" || os.Getenv("WAYLAND_DISPLAY") != "") {
		if p, err := exec.LookPath("xdg-open"); err == nil {
			cmd := exec.Command(p, url)
			if cmd.Start() == nil {
				go cmd.Wait()
			}
		}
	}
	return nil
}

// webAddr starts mosaic-web.socket if needed and returns its TCP address.
func webAddr(ctx context.Context) (string, error) {
	if err := units.StartUnit(ctx, units.WebSocketUnit); err != nil {
		return "", err
	}
	addr := webDefaultAddr
	err := userbus.Default().Do(ctx, func(conn *sd.Conn) error {
		p, err := conn.GetUnitTypePropertyContext(ctx, units.WebSocketUnit, "Socket", "Listen")
		if err != nil {
			return err
		}
		// Listen is a(ss): (type, address) pairs.
		list, _ := p.Value.Value().([][]any)
		for _, l := range list {
			if len(l) == 2 && l[0] == "Stream" {
				if a, _ := l[1].(string); strings.Contains(a, ":") && !strings.HasPrefix(a, "/") {
					addr = a
					return nil
				}
			}
		}
		return nil
	})
	return addr, err
}

func runWebServe(c *cli.Context) error {
	st, err := webStore(c)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Refusals go to the journal as the controller's do, one structured
	// entry each (MOSAIC_REFUSAL=web-auth, journalctl -x), not as text.
	srv, err := web.New(ctx, web.Options{Store: st, Hosts: c.StringSlice("allow-host"), Idle: c.Duration("idle"),
		Log: log.New(os.Stderr, "", 0), Audit: audit.New("web")})
	if err != nil {
		return err
	}
	var ls []net.Listener
	if a := c.String("listen"); a != "" {
		l, err := net.Listen("tcp", a)
		if err != nil {
			return err
		}
		ls = append(ls, l)
	} else {
		ls, err = sdact.Listeners()
		if err != nil {
			return fmt.Errorf("activated sockets: %w", err)
		}
		os.Unsetenv("LISTEN_FDS")
		if len(ls) == 0 {
			return fmt.Errorf("%w: start it with `systemctl --user start %s`, or pass --listen 127.0.0.1:PORT", activation.ErrNoListener, units.WebSocketUnit)
		}
	}
	for _, l := range ls {
		srv.AddListenerHosts(l)
	}
	activation.Notify("READY=1")
	return srv.Serve(ctx, ls...)
}

func runWebSessions(c *cli.Context) error {
	st, err := webStore(c)
	if err != nil {
		return err
	}
	list, err := st.Sessions()
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tCREATED\tEXPIRES\tFROM\tBROWSER")
	for _, s := range list {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", s.ID, s.Created.Local().Format(time.DateTime),
			s.Expires.Local().Format(time.DateTime), s.Addr, terminal.SanitizeLine(s.Agent))
	}
	return w.Flush()
}

func runWebRevoke(c *cli.Context) error {
	if c.NArg() != 1 {
		return usageError("`mosaicctl web revoke` wants one session id (or `all`); `mosaicctl web sessions` lists them")
	}
	st, err := webStore(c)
	if err != nil {
		return err
	}
	n, err := st.Revoke(c.Args().First())
	if errors.Is(err, web.ErrNoSession) {
		return protocol.Wrap(protocol.CodeUsage, err, "")
	}
	if err != nil {
		return err
	}
	fmt.Printf("revoked %d session(s)\n", n)
	return nil
}
