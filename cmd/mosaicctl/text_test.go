package main

import (
	"io"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/protocol"
)

// countingReader counts the bytes the child's stdin pipe took from it.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// endless is an unending stream of one byte, as `yes` or /dev/zero give.
type endless byte

func (e endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(e)
	}
	return len(p), nil
}

// TestOverlongTextIsRefusedNotUnknown: a text that cannot fit one protocol
// line (more than 1 MiB, or less but so many control characters that its
// JSON escape does not fit) is refused line-too-long (exit 2) before the
// verb connects: sent, the controller closes the connection mid-write and
// the verb could only say "outcome unknown, never send it again" of a
// prompt that was never queued. Standard input is read only up to the
// cap: a stream that does not end (`yes | mosaicctl prompt ID -`) is
// refused after about one line's worth, never read into memory whole.
func TestOverlongTextIsRefusedNotUnknown(t *testing.T) {
	sandboxtest.Require(t)
	bin := sandboxtest.Bin(t, "mosaicctl")
	t.Setenv("PATH", "/usr/bin:/bin") // no pi: the refusal must come before any engine
	id, _, _ := startConversation(t, bin, "overlong")
	const streamCap = 16 << 20 // what the stdin pipe may take before the test gives up
	for _, tc := range []struct {
		name  string
		args  []string
		stdin io.Reader
	}{
		{"prompt of a stream that does not end", []string{"prompt", "--take", id, "-"}, io.LimitReader(endless('y'), streamCap)},
		{"prompt of 200k control characters", []string{"prompt", "--take", id, "-"}, strings.NewReader(strings.Repeat("\x01", 200_000))},
		{"queue edit of a stream that does not end", []string{"queue", "edit", "--take", id, "q-0000000000000000", "-"}, io.LimitReader(endless('y'), streamCap)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := &countingReader{r: tc.stdin}
			cmd := exec.Command(bin, tc.args...)
			cmd.Stdin = in
			r := runCmd(t, cmd)
			wantRefusal(t, r, protocol.CodeLineTooLong)
			if strings.Contains(r.stderr, "started ") {
				t.Errorf("stderr %q: the refusal must come before connecting", r.stderr)
			}
			// The pipe holds 64 KiB and os/exec copies 32 KiB at a time:
			// a bounded read takes little more than one line.
			if n := in.n.Load(); n > 4*protocol.MaxLine {
				t.Errorf("the verb took %d bytes of standard input; want it to stop after one line's worth (%d)", n, protocol.MaxLine)
			}
		})
	}
	if r := run(t, bin, "queue", id); r.code != 0 || !strings.Contains(r.stdout, "the queue is empty") {
		t.Fatalf("queue after the refusals: exit %d, stdout %q, stderr %q; want it empty", r.code, r.stdout, r.stderr)
	}
}

// TestPromptTextBound: the bound is the protocol line, counted on the
// JSON escape, and a text at the bound passes whole.
func TestPromptTextBound(t *testing.T) {
	fits := protocol.MaxLine - commandHeadroom - 2 // the quotes
	for _, tc := range []struct {
		name, arg, stdin string
		refused          bool
	}{
		{"argument at the bound", strings.Repeat("a", fits), "", false},
		{"argument one over", strings.Repeat("a", fits+1), "", true},
		{"stdin at the bound", "-", strings.Repeat("a", fits), false},
		{"stdin of one line and a byte", "-", strings.Repeat("a", protocol.MaxLine+1), true},
		{"escapes counted", strings.Repeat("\x01", fits/6+1), "", true},
		{"a dash alone inside the text", "a - b", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := promptText(tc.arg, strings.NewReader(tc.stdin))
			if tc.refused {
				if protocol.CodeOf(err) != protocol.CodeLineTooLong {
					t.Fatalf("promptText: %v; want line-too-long", err)
				}
				return
			}
			want := tc.arg
			if tc.arg == "-" {
				want = tc.stdin
			}
			if err != nil || got != want {
				t.Fatalf("promptText: %d bytes, %v; want the %d bytes back", len(got), err, len(want))
			}
		})
	}
}
