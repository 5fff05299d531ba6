package main

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"time"

	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/urfave/cli/v2"
)

func helloCommand() *cli.Command {
	return &cli.Command{
		Name:      "hello",
		Usage:     "connect to a conversation (socket-activating its controller), say hello and print the welcome",
		ArgsUsage: "ID",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "socket", Usage: "connect to `PATH` instead of the conversation's socket"},
			&cli.DurationFlag{Name: "timeout", Value: 30 * time.Second, Usage: "give up when the welcome has not come after `DURATION` (0: never), the controller's start included"},
		},
		Action: func(c *cli.Context) error {
			if _, err := idArg(c); err != nil {
				return err
			}
			limit := c.Duration("timeout")
			if limit < 0 {
				return usageError("--timeout %s is negative: give a duration such as 30s or 5m, or 0 to wait for ever", limit)
			}
			path, err := conversationSocket(c.Context, c.Args().First(), c.String("socket"))
			if err != nil {
				return err
			}
			var deadline time.Time
			if limit > 0 {
				deadline = time.Now().Add(limit)
			}
			conn, err := (&net.Dialer{Deadline: deadline}).DialContext(c.Context, "unix", path)
			if err != nil {
				return dialError(c.Context, c.Args().First(), "connect to "+path, err, limit)
			}
			defer conn.Close()
			conn.SetDeadline(deadline)
			// Protocol 1: hello reads no event, so runs of deltas (2) would
			// gain it nothing, and a controller older than runs refuses 2.
			hello, _ := json.Marshal(protocol.Hello{Type: "hello", Client: "mosaicctl/" + version, Protocol: 1})
			// A controller may refuse before reading (a peer of another uid
			// is refused at accept), so a failed write still reads the answer.
			_, werr := conn.Write(append(hello, '\n'))
			line, err := bufio.NewReader(conn).ReadBytes('\n')
			if err != nil {
				// A controller that fails at start resets the connection
				// systemd queued for it.
				if werr != nil {
					return dialError(c.Context, c.Args().First(), "send hello to "+path, werr, limit)
				}
				return dialError(c.Context, c.Args().First(), "read the welcome from "+path, err, limit)
			}
			var r protocol.RefusalRecord
			if json.Unmarshal(line, &r) == nil && r.Record == "refusal" {
				return &protocol.Refusal{Code: r.Code, Message: r.Message}
			}
			_, err = os.Stdout.Write(line)
			return err
		},
	}
}
