package client

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/protocol"
)

// BenchmarkStream is the client's share of a fan-out: one connection
// reading b.N text deltas, as the controller writes them, through Updates.
// It runs without a controller, so what it measures is this package's
// read loop, decode and queue per event (ns/op, B/op, allocs/op).
func BenchmarkStream(b *testing.B) {
	path := streamServer(b, b.N) // encoded before the clock starts
	b.ReportAllocs()
	b.ResetTimer()
	if err := clientRead(path, b.N); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkStreamObservers is the client's share of the controller's
// fan-out benchmark with 100 observers: 100 connections in this process
// each read the same 3000 text deltas through Updates, and the CPU time
// this process spent on them (user and system, from getrusage, so the
// load of other processes counts less than in wall time) is compared
// with 100 connections that only split the same bytes into lines. The
// writers (one goroutine per connection, the stream written in 256 KiB
// writes as the controller's writer batches it) are the same on both
// sides. cpu-ns/event is per event and connection.
func BenchmarkStreamObservers(b *testing.B) {
	const observers, events = 100, 3000
	path := streamServer(b, events)
	var client, bare time.Duration
	for range b.N {
		bare += cpuSpent(b, observers, func() error { return bareRead(path, events) })
		client += cpuSpent(b, observers, func() error { return clientRead(path, events) })
	}
	n := float64(b.N * observers * events)
	b.ReportMetric(float64(client.Nanoseconds())/n, "cpu-ns/event")
	b.ReportMetric(float64(bare.Nanoseconds())/n, "bare-cpu-ns/event")
	b.ReportMetric(float64(client)/float64(bare), "x-bare")
}

// streamServer serves every connection a welcome and then events text
// deltas, after reading its hello.
func streamServer(b *testing.B, events int) string {
	b.Helper()
	dir := b.TempDir()
	path := filepath.Join(dir, "c.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	var stream []byte
	for i := 1; i <= events; i++ {
		line, _ := protocol.Line(protocol.Event{Record: protocol.RecordEvent, Kind: protocol.EventTextDelta, Execution: "e-0123456789abcdef",
			Seq: uint64(i), Message: "m-0123456789", Role: "assistant", Block: protocol.Ordinal(0), BlockType: "text",
			Fragment: protocol.Ordinal(i), UpdateMode: protocol.UpdateAppend, Text: strconv.FormatInt(1764770000000000000+int64(i), 10) + " "})
		stream = append(stream, line...)
	}
	welcome, _ := protocol.Line(protocol.Welcome{Record: protocol.RecordWelcome, Conversation: "pi-b", Connection: "k-1", Mode: "observer", Server: "bench", Protocol: 1})
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if _, err := bufio.NewReader(c).ReadBytes('\n'); err != nil {
					return
				}
				c.Write(welcome)
				for s := stream; len(s) > 0; {
					k := min(len(s), 256<<10)
					if _, err := c.Write(s[:k]); err != nil {
						return
					}
					s = s[k:]
				}
				c.Read(make([]byte, 1)) // until the reader closes
			}()
		}
	}()
	return path
}

// cpuSpent runs read on n connections at once and returns the process's
// CPU time meanwhile.
func cpuSpent(b *testing.B, n int, read func() error) time.Duration {
	b.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	c0 := cpuTime()
	for range n {
		wg.Go(func() {
			if err := read(); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	spent := cpuTime() - c0
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return spent
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// clientRead reads events deltas through the client library, in order.
// The queue holds all of them if it must: a reader that falls behind a
// writer on the same two CPUs (BenchmarkStream with a large b.N) would
// otherwise lose its place, which is not what is measured; should it
// still, the benchmark fails rather than wait for events that were
// dropped.
func clientRead(path string, events int) error {
	c, err := Dial(context.Background(), path, Options{Name: "bench", QueueEvents: max(DefaultQueueEvents, events)})
	if err != nil {
		return err
	}
	defer c.Close()
	var next uint64 = 1
	for u := range c.Updates() {
		if u.Notice != nil && u.Notice.Kind == protocol.NoticeLostPlace {
			return fmt.Errorf("the reader lost its place after seq %d: %s", next-1, u.Raw)
		}
		if u.Event == nil {
			continue
		}
		if u.Event.Seq != next {
			return fmt.Errorf("seq %d, want %d", u.Event.Seq, next)
		}
		if next == uint64(events) {
			return nil
		}
		next++
	}
	return c.Err()
}

// bareRead sends the hello and counts lines up to the last delta.
func bareRead(path string, events int) error {
	c, err := net.Dial("unix", path)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Write([]byte(`{"type":"hello","client":"bench"}` + "\n")); err != nil {
		return err
	}
	in := bufio.NewReaderSize(c, 64<<10)
	for n := -1; n < events; n++ { // the welcome, then the events
		line, err := in.ReadSlice('\n')
		if err != nil {
			return err
		}
		if !bytes.HasPrefix(line, []byte(`{"record":`)) {
			return fmt.Errorf("line %q", line)
		}
	}
	return nil
}
