package controller

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

// TestStderrTailBounds: a flood of stderr is forwarded at most at the rate
// per window, with a count of what was dropped; the tail keeps the last
// lines within its bounds, long lines cut; nothing grows with the input.
func TestStderrTailBounds(t *testing.T) {
	tests := []struct {
		name      string
		input     string
		windows   int // windows the clock moves through while writing
		wantTail  []string
		wantCut   bool
		forwarded func(t *testing.T, out string)
	}{
		{
			name:     "a few lines",
			input:    "one\r\ntwo\nthree",
			wantTail: []string{"one", "two", "three"},
			forwarded: func(t *testing.T, out string) {
				if out != "engine e-1: one\nengine e-1: two\nengine e-1: three\n" {
					t.Fatalf("forwarded %q", out)
				}
			},
		},
		{
			name:     "a flood in one window",
			input:    strings.Repeat(strings.Repeat("x", 99)+"\n", 100000) + "last words\n",
			wantTail: append(repeat(strings.Repeat("x", 99), 19), "last words"),
			wantCut:  true,
			forwarded: func(t *testing.T, out string) {
				if len(out) > stderrRate*3/2 || !strings.Contains(out, "bytes of engine stderr dropped") {
					t.Fatalf("forwarded %d bytes, ending %q", len(out), out[max(0, len(out)-200):])
				}
			},
		},
		{
			name:     "a flood of empty lines",
			input:    strings.Repeat("\n", 1<<20) + "last words\n",
			wantTail: append(repeat("", 19), "last words"),
			wantCut:  true,
			forwarded: func(t *testing.T, out string) {
				// Each line is a journal entry: the flood is bounded in
				// lines, not only in the engine's bytes.
				if n := strings.Count(out, "\n"); n > stderrLines+1 || !strings.Contains(out, fmt.Sprintf("%d lines", 1<<20+1-stderrLines)) {
					t.Fatalf("forwarded %d lines for a flood of empty ones, ending %q", n, out[max(0, len(out)-200):])
				}
			},
		},
		{
			name:     "a long line is cut",
			input:    strings.Repeat("y", 1<<20) + "\nafter\n",
			wantTail: []string{strings.Repeat("y", maxLineKept) + fmt.Sprintf(" [%d more bytes]", 1<<20-maxLineKept), "after"},
			forwarded: func(t *testing.T, out string) {
				if len(out) > 2*maxLineKept {
					t.Fatalf("forwarded %d bytes for a long line", len(out))
				}
			},
		},
		{
			// journald's stream reader ends an entry at NUL as at LF: a
			// NUL forwarded would make one line many entries, the text
			// after it without the prefix. The tail keeps what was written
			// (its readers escape it).
			name:     "NUL and controls are escaped, one line each",
			input:    "a\x00engine e-0: forged\x00\x1b[31mred\x7f\u202e\tb\n",
			wantTail: []string{"a\x00engine e-0: forged\x00\x1b[31mred\x7f\u202e\tb"},
			forwarded: func(t *testing.T, out string) {
				if want := `engine e-1: a\u{0000}engine e-0: forged\u{0000}\u{001B}[31mred\u{007F}\u{202E}\tb` + "\n"; out != want {
					t.Fatalf("forwarded %q, want %q", out, want)
				}
			},
		},
		{
			// An escape is eight bytes for one: the rate bounds what the
			// journal gets, not only what the engine wrote.
			name:     "a flood of NUL lines is bounded as escaped",
			input:    strings.Repeat(strings.Repeat("\x00", 500)+"\n", 1000),
			wantTail: repeat(strings.Repeat("\x00", 500), 8),
			wantCut:  true,
			forwarded: func(t *testing.T, out string) {
				if len(out) > stderrRate+maxLineKept || !strings.Contains(out, "bytes of engine stderr dropped") {
					t.Fatalf("forwarded %d bytes of a NUL flood, ending %q", len(out), out[max(0, len(out)-200):])
				}
			},
		},
		{
			name:     "invalid UTF-8 is replaced",
			input:    "bad \xff byte\n",
			wantTail: []string{"bad \uFFFD byte"},
			forwarded: func(t *testing.T, out string) {
				if !strings.Contains(out, "\uFFFD") {
					t.Fatalf("forwarded %q", out)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			s := newStderrTail("e-1", &out)
			clock := time.Unix(0, 0)
			s.now = func() time.Time { return clock }
			s.run(io.MultiReader(strings.NewReader(tc.input)))
			lines, cut := s.tail(true)
			if strings.Join(lines, "|") != strings.Join(tc.wantTail, "|") || cut != tc.wantCut {
				t.Fatalf("tail %d lines (cut %v), want %d (cut %v): %.300q", len(lines), cut, len(tc.wantTail), tc.wantCut, lines)
			}
			size := 0
			for _, l := range lines {
				size += len(l) + 1
			}
			if len(lines) > tailLines || (len(lines) > 1 && size > tailBytes) {
				t.Fatalf("tail of %d lines, %d bytes", len(lines), size)
			}
			tc.forwarded(t, out.String())
		})
	}
}

// TestStderrTailRate: across windows, each window forwards at most the
// rate, and the drop of one window is reported when the next begins.
func TestStderrTailRate(t *testing.T) {
	var out bytes.Buffer
	s := newStderrTail("e-2", &out)
	clock := time.Unix(0, 0)
	s.now = func() time.Time { return clock }
	line := []byte(strings.Repeat("z", 1023))
	for w := range 3 {
		for range 64 { // 64 KiB a window, four times the rate
			s.line(line, 0)
		}
		if w < 2 {
			clock = clock.Add(stderrWindow)
		}
	}
	s.flush()
	got := out.String()
	if n := strings.Count(got, "bytes of engine stderr dropped"); n != 3 {
		t.Fatalf("%d drop notices, want one per window:\n%s", n, tail(got))
	}
	if kept := strings.Count(got, "\nengine e-2: zzz"); kept > 3*stderrRate/1024 {
		t.Fatalf("%d lines forwarded in 3 windows, over the rate", kept)
	}
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func tail(s string) string { return s[max(0, len(s)-400):] }
