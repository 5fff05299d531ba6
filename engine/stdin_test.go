package engine_test

import (
	"context"
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/engine/claude"
	"github.com/mosaic-agents/mosaic/engine/pi"
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
// holds a write for ever; Close of either adapter returns anyway and the
// blocked write fails, so Controller.Close and a force stop's
// finishStop never hang on it. Before, Close took the write lock the
// blocked write held.
func TestCloseDuringStuckWrite(t *testing.T) {
	type conn interface {
		Close() error
		Prompt(context.Context, string) (engine.Dispatch, error)
	}
	for _, tc := range []struct {
		name string
		open func(r io.Reader, w io.WriteCloser) (conn, error)
	}{
		{"pi", func(r io.Reader, w io.WriteCloser) (conn, error) {
			return pi.New(r, w, engine.Options{Execution: "x1"})
		}},
		{"claude", func(r io.Reader, w io.WriteCloser) (conn, error) {
			return claude.New(r, w, "", engine.Options{Execution: "x1"})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, outW := io.Pipe()
			t.Cleanup(func() { outW.Close() })
			in := fullStdin(t)
			c, err := tc.open(out, in)
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
				if err == nil {
					t.Fatal("the blocked prompt reports success after Close")
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the blocked write never returned after Close")
			}
		})
	}
}
