package engine_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/engine/claude"
	"github.com/mosaic-agents/mosaic/engine/pi"
	"github.com/mosaic-agents/mosaic/protocol"
)

// enteredFile is the engine's stdin as the controller holds it (a
// pollable *os.File) that says when a write began.
type enteredFile struct {
	*os.File
	entered chan struct{}
}

func (f *enteredFile) Write(p []byte) (int, error) {
	select {
	case f.entered <- struct{}{}:
	default:
	}
	return f.File.Write(p)
}

// fullStdin is an engine's stdin that the engine never reads, already
// full: the next write blocks.
func fullStdin(t *testing.T) *enteredFile {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	chunk := make([]byte, 64<<10)
	for {
		if err := w.SetWriteDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(chunk); err != nil {
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatal(err)
			}
			break
		}
	}
	if err := w.SetWriteDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	return &enteredFile{File: w, entered: make(chan struct{}, 1)}
}

// TestCloseDuringStuckWrite: an engine that stopped reading its stdin
// holds a write until its deadline; Close of either adapter returns at
// once anyway and the blocked write fails, so Controller.Close and a
// force stop's finishStop never wait on it. Before, Close took the write
// lock the blocked write held. The write Close cut short is the
// controller's doing: it wrote nothing (the prompt was not sent), and it
// is not reported as the engine's stdin breaking (no stdin-broken event,
// which would make the binding uncertain under the force stop).
func TestCloseDuringStuckWrite(t *testing.T) {
	for _, tc := range adapters {
		t.Run(tc.name, func(t *testing.T) {
			out, outW := io.Pipe()
			t.Cleanup(func() { outW.Close() })
			in := fullStdin(t)
			c, err := tc.open(out, in, engine.Options{Execution: "x1"})
			if err != nil {
				t.Fatal(err)
			}
			sent := make(chan error, 1)
			go func() {
				_, err := c.Prompt(context.Background(), "hello")
				sent <- err
			}()
			<-in.entered
			closed := make(chan error, 1)
			go func() { closed <- c.Close() }()
			select {
			case err := <-closed:
				if err != nil {
					t.Fatalf("close: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("Close waits on the write the engine never reads")
			}
			select {
			case err := <-sent:
				if err == nil || !engine.Unwritten(err) {
					t.Fatalf("the prompt Close cut short: %v, want an error saying nothing was written", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the blocked write never returned after Close")
			}
			var b *engine.StdinError
			if !errors.As(c.StdinBroken(), &b) || !b.Closed {
				t.Errorf("StdinBroken = %v, want the write Close cut short", c.StdinBroken())
			}
			outW.Close()
			for ev := range c.Events() {
				if ev.Reason == protocol.ReasonStdinBroken {
					t.Fatalf("Close's own cut reported as the engine's: %+v", ev)
				}
			}
		})
	}
}

// driver is what the stdin tests drive of either adapter.
type driver interface {
	Close() error
	Prompt(context.Context, string) (engine.Dispatch, error)
	Turn() engine.TurnSummary
	Events() <-chan protocol.Event
	StdinBroken() error
}

// adapters open each engine's Conn on stdout r and stdin w.
var adapters = []struct {
	name string
	open func(r io.Reader, w io.WriteCloser, opts engine.Options) (driver, error)
}{
	{"pi", func(r io.Reader, w io.WriteCloser, opts engine.Options) (driver, error) { return pi.New(r, w, opts) }},
	{"claude", func(r io.Reader, w io.WriteCloser, opts engine.Options) (driver, error) {
		return claude.New(r, w, "", opts)
	}},
}

// stdinTimeout is the deadline of the tests' stdin writes: short, so a
// test does not wait for the default; no test asserts it.
const stdinTimeout = 50 * time.Millisecond

// TestStuckStdinBreaks: a prompt written to an engine that stopped
// reading its stdin fails at its deadline instead of blocking for ever;
// nothing of it was written, so it is refused engine-gone (not sent: no
// receipt, the slot free), the Conn reports its stdin broken with an
// unavailable stdin-broken event, and the next prompt is refused without
// any write. Before, the write blocked until Close.
func TestStuckStdinBreaks(t *testing.T) {
	for _, tc := range adapters {
		t.Run(tc.name, func(t *testing.T) {
			out, outW := io.Pipe()
			t.Cleanup(func() { outW.Close() })
			in := fullStdin(t)
			c, err := tc.open(out, in, engine.Options{Execution: "x1", StdinTimeout: stdinTimeout})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			d, err := promptWithin(t, c, "hello")
			if code := protocol.CodeOf(err); code != protocol.CodeEngineGone || !errors.Is(err, engine.ErrStdinBroken) || !engine.Unwritten(err) {
				t.Fatalf("prompt into a stdin nobody reads: %v (code %q), want engine-gone, stdin broken, unwritten", err, code)
			}
			if d.RequestID != "" || d.Receipt != "" {
				t.Errorf("a prompt never written is reported as dispatched: %+v", d)
			}
			if s := c.Turn().Slot; s != nil {
				t.Errorf("a prompt never written holds the slot: %+v", s)
			}
			var b *engine.StdinError
			if !errors.As(c.StdinBroken(), &b) || b.Timeout != stdinTimeout || b.Written != 0 {
				t.Errorf("StdinBroken = %v, want the write that missed its deadline with nothing written", c.StdinBroken())
			}
			waitReason(t, c.Events(), protocol.ReasonStdinBroken)

			<-in.entered
			if _, err := promptWithin(t, c, "again"); !errors.Is(err, engine.ErrStdinBroken) || protocol.CodeOf(err) != protocol.CodeEngineGone {
				t.Fatalf("prompt after the stdin broke: %v, want engine-gone", err)
			}
			select {
			case <-in.entered:
				t.Fatal("a record was written after the stdin broke")
			default:
			}
		})
	}
}

// TestNoRecordAfterPartialWrite: a record the engine took only part of
// (it stopped reading mid-record) breaks the stdin; once the engine reads
// again, it finds that part and nothing after it: a later record would be
// read glued onto the partial line.
func TestNoRecordAfterPartialWrite(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	var broke []error
	s := engine.NewStdin(w, stdinTimeout, func(err error) { broke = append(broke, err) })
	rec := append(bytes.Repeat([]byte("x"), 1<<20), '\n') // more than the pipe holds
	err = s.Write(rec)
	var b *engine.StdinError
	if !errors.As(err, &b) || b.Written == 0 || b.Written >= len(rec) || protocol.CodeOf(err) != protocol.CodeDeliveryUnknown || engine.Unwritten(err) {
		t.Fatalf("write past what the pipe holds: %v, want delivery-unknown with part written", err)
	}
	if len(broke) != 1 || !errors.Is(broke[0], engine.ErrStdinBroken) {
		t.Errorf("onBreak saw %v, want the one write that broke", broke)
	}
	read := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(r)
		read <- b
	}()
	if err := s.Write([]byte("{}\n")); protocol.CodeOf(err) != protocol.CodeEngineGone || !engine.Unwritten(err) {
		t.Fatalf("write after a partial one: %v, want engine-gone, unwritten", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	got := <-read
	if !bytes.Equal(got, rec[:b.Written]) {
		t.Fatalf("the engine read %d bytes ending %q, want the %d of the partial record and nothing after", len(got), tail(got), b.Written)
	}
	if len(broke) != 1 {
		t.Errorf("onBreak called %d times, want once", len(broke))
	}
}

func tail(b []byte) []byte {
	if len(b) > 16 {
		return b[len(b)-16:]
	}
	return b
}

// promptWithin prompts c and fails the test if the prompt does not
// return (a hang guard, not a measured time).
func promptWithin(t *testing.T, c driver, text string) (engine.Dispatch, error) {
	t.Helper()
	type result struct {
		d   engine.Dispatch
		err error
	}
	done := make(chan result, 1)
	go func() {
		d, err := c.Prompt(context.Background(), text)
		done <- result{d, err}
	}()
	select {
	case r := <-done:
		return r.d, r.err
	case <-time.After(30 * time.Second):
		t.Fatal("the prompt never returned: its write has no deadline")
	}
	return engine.Dispatch{}, nil
}

// waitReason waits for an unavailable event with reason.
func waitReason(t *testing.T, events <-chan protocol.Event, reason string) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.Kind == protocol.EventUnavailable && ev.Reason == reason {
				return
			}
		case <-timeout:
			t.Fatalf("no unavailable event with reason %s", reason)
		}
	}
}

// TestSlowReaderKeepsItsRecord: the deadline bounds a write's progress,
// not the whole record: an engine that reads its stdin slowly but
// steadily (a busy event loop) takes a record whose write lasts many
// deadlines whole, and the stdin stays unbroken.
func TestSlowReaderKeepsItsRecord(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	const timeout = 500 * time.Millisecond
	s := engine.NewStdin(w, timeout, func(err error) { t.Errorf("stdin broke: %v", err) })
	rec := bytes.Repeat([]byte("x"), 4<<20)
	rec[len(rec)-1] = '\n'
	got := make(chan int, 1)
	go func() {
		// 16 KiB every 10 ms: the 4 MiB take about 2.6 s, five deadlines.
		buf := make([]byte, 16<<10)
		n := 0
		for n < len(rec) {
			m, err := r.Read(buf)
			n += m
			if err != nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		got <- n
	}()
	if err := s.Write(rec); err != nil {
		t.Fatalf("a record read slowly but steadily: %v", err)
	}
	if n := <-got; n != len(rec) {
		t.Fatalf("the reader got %d of %d bytes", n, len(rec))
	}
	if err := s.Broken(); err != nil {
		t.Fatalf("Broken = %v after a whole record", err)
	}
}
