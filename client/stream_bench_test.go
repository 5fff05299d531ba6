package client

import (
	"bufio"
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/mosaic-agents/mosaic/protocol"
)

// BenchmarkStream is the client's share of a fan-out: one connection
// reading b.N text deltas, as the controller writes them, through Updates.
// It runs without a controller, so what it measures is this package's
// read loop, decode and queue per event (ns/op, B/op, allocs/op).
func BenchmarkStream(b *testing.B) {
	dir, err := os.MkdirTemp("", "mcb-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "c.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	n := b.N
	var stream []byte // encoded before the clock starts
	for i := 1; i <= n; i++ {
		line, _ := protocol.Line(protocol.Event{Record: protocol.RecordEvent, Kind: protocol.EventTextDelta, Execution: "e-0123456789abcdef",
			Seq: uint64(i), Message: "m-0123456789", Role: "assistant", Block: protocol.Ordinal(0), BlockType: "text",
			Fragment: protocol.Ordinal(i), UpdateMode: protocol.UpdateAppend, Text: strconv.FormatInt(1764770000000000000+int64(i), 10) + " "})
		stream = append(stream, line...)
	}
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		if _, err := bufio.NewReader(c).ReadBytes('\n'); err != nil {
			return
		}
		welcome, _ := protocol.Line(protocol.Welcome{Record: protocol.RecordWelcome, Conversation: "pi-b", Connection: "k-1", Mode: "observer", Server: "bench", Protocol: protocol.Version})
		c.Write(welcome)
		for len(stream) > 0 {
			k := min(len(stream), 256<<10)
			if _, err := c.Write(stream[:k]); err != nil {
				return
			}
			stream = stream[k:]
		}
	}()
	c, err := Dial(context.Background(), path, Options{Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	b.ReportAllocs()
	b.ResetTimer()
	var next uint64 = 1
	for u := range c.Updates() {
		if u.Event == nil {
			continue
		}
		if u.Event.Seq != next {
			b.Fatalf("seq %d, want %d", u.Event.Seq, next)
		}
		if next == uint64(n) {
			break
		}
		next++
	}
}
