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
// JSON escape, and a text at the bound passes whole. The bound is in
// bytes, the contract's cap in characters: a text of four-byte characters
// meets the line's bound within the cap.
func TestPromptTextBound(t *testing.T) {
	fits := protocol.MaxLine - commandHeadroom - 2 // the quotes
	atBound := strings.Repeat("\U0001F600", fits/4) + strings.Repeat("a", fits%4)
	for _, tc := range []struct {
		name, arg, stdin string
		code             string // "" when the text passes
	}{
		{"argument at the bound", atBound, "", ""},
		{"argument one over", atBound + "a", "", protocol.CodeLineTooLong},
		{"stdin at the bound", "-", atBound, ""},
		{"stdin of one line and a byte", "-", strings.Repeat("a", protocol.MaxLine+1), protocol.CodeLineTooLong},
		{"escapes counted", strings.Repeat("\x01", fits/6+1), "", protocol.CodeLineTooLong},
		{"a dash alone inside the text", "a - b", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := promptText(tc.arg, strings.NewReader(tc.stdin))
			if tc.code != "" {
				if protocol.CodeOf(err) != tc.code {
					t.Fatalf("promptText: %v; want %s", err, tc.code)
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

// TestPromptTextAdmission: a text the controller's admission refuses is
// refused before the verb connects, with admission's code, so `--take`
// never revokes another client's control for a command that does nothing.
func TestPromptTextAdmission(t *testing.T) {
	for _, tc := range []struct {
		name, arg, stdin string
		code             string // "" when the text passes
	}{
		{"empty argument", "", "", protocol.CodeDraft},
		{"empty standard input", "-", "", protocol.CodeDraft},
		{"characters at the cap", strings.Repeat("a", protocol.MaxPromptChars), "", ""},
		{"one character over the cap", strings.Repeat("a", protocol.MaxPromptChars+1), "", protocol.CodeDraft},
		{"a slash first", "/help", "", protocol.CodeTextPolicy},
		{"a slash after spaces", "  /help", "", protocol.CodeTextPolicy},
		{"a slash after a zero-width space", "\u200b/skill:x", "", protocol.CodeTextPolicy},
		{"a slash on standard input", "-", "/help\n", protocol.CodeTextPolicy},
		{"a word before the slash", "explain /help", "", ""},
		{"a quote before the slash", "'/help'", "", ""},
		{"a slash on a later line", "see\n/help", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := promptText(tc.arg, strings.NewReader(tc.stdin))
			if got := protocol.CodeOf(err); got != tc.code || (tc.code == "" && err != nil) {
				t.Fatalf("promptText: %v (code %q); want code %q", err, got, tc.code)
			}
		})
	}
}
