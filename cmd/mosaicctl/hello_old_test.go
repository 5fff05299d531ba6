package main

import (
	"context"
	"net"
	"path/filepath"
	"testing"

	"github.com/mosaic-agents/mosaic/protocol"
)

// TestHelloToAControllerOlderThanRuns: `mosaicctl hello` prints the
// welcome and reads no event, so its hello names protocol 1: a controller
// older than runs of deltas, still running after an upgrade
// (docs/protocol.md section 3), refuses a hello naming 2.
func TestHelloToAControllerOlderThanRuns(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	named := make(chan int, 4)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				lines := protocol.NewLineReader(c, protocol.MaxLine)
				line, err := lines.Next()
				if err != nil {
					return
				}
				var h protocol.Hello
				if err := protocol.Decode(line, &h); err != nil {
					return
				}
				named <- h.Protocol
				// As the controller did before protocol 2: Version was 1.
				if h.Protocol > 1 {
					b, _ := protocol.Line(protocol.Refuse(protocol.CodeProtocolVersion,
						"protocol %d is not supported; this server speaks protocol 1", h.Protocol).Record(""))
					c.Write(b)
					return
				}
				b, _ := protocol.Line(protocol.Welcome{Record: protocol.RecordWelcome, Conversation: "pi-00000000000000000000",
					Connection: "k-1", Mode: "observer", Server: "mosaic/old", Protocol: 1})
				c.Write(b)
			}()
		}
	}()
	err = newApp().RunContext(context.Background(), []string{"mosaicctl", "hello", "--socket", sock, "pi-00000000000000000000"})
	if err != nil {
		t.Errorf("mosaicctl hello to a controller older than runs: %v (its hello named protocol %d)", err, <-named)
	}
}
