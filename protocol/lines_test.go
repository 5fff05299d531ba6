package protocol

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// readers wrap a stream the ways a socket may deliver it.
var readers = []struct {
	name string
	wrap func(io.Reader) io.Reader
}{
	{"whole", func(r io.Reader) io.Reader { return r }},
	{"halves", iotest.HalfReader},
	{"bytes", iotest.OneByteReader},
	{"data with EOF", iotest.DataErrReader},
}

// readLines drains a LineReader, returning its lines (as handed out,
// not copied) and the error that ended it.
func readLines(t *testing.T, l *LineReader) ([][]byte, error) {
	t.Helper()
	var lines [][]byte
	for {
		line, err := l.Next()
		if err != nil {
			return lines, err
		}
		lines = append(lines, line)
	}
}

// TestLineReaderSplits: lines are framed the same however the stream is
// cut into reads.
func TestLineReaderSplits(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		max   int
		want  []string
		final error
	}{
		{"lf only", "a\nb\n", 10, []string{"a", "b"}, nil},
		{"crlf", "a\r\nb\r\n", 10, []string{"a", "b"}, nil},
		{"u2028 is not a line end", "x\u2028y\n", 10, []string{"x\u2028y"}, nil},
		{"last line without lf", "a\nb", 10, []string{"a", "b"}, nil},
		{"empty lines", "\n\na\n", 10, []string{"", "", "a"}, nil},
		{"exactly max", "abcd\n", 4, []string{"abcd"}, nil},
		{"over max", "abcde\n", 4, nil, ErrLineTooLong},
		{"over max without lf", "ab\nabcde", 4, nil, ErrLineTooLong},
		{"over max past a block", strings.Repeat("x", 3*readBlock) + "\n", 2 * readBlock, nil, ErrLineTooLong},
	}
	for _, tt := range tests {
		for _, r := range readers {
			t.Run(tt.name+"/"+r.name, func(t *testing.T) {
				lines, err := readLines(t, NewLineReader(r.wrap(strings.NewReader(tt.in)), tt.max))
				if tt.final != nil {
					if !errors.Is(err, tt.final) {
						t.Fatalf("err = %v, want %v", err, tt.final)
					}
					return
				}
				if !errors.Is(err, io.EOF) {
					t.Fatalf("err = %v, want EOF", err)
				}
				var got []string
				for _, line := range lines {
					got = append(got, string(line))
				}
				if strings.Join(got, "|") != strings.Join(tt.want, "|") {
					t.Fatalf("lines = %q, want %q", got, tt.want)
				}
			})
		}
	}
}

// TestLineReaderNeverWritesAHandedOutLine: a line handed out is kept
// without a copy (the client's Update.Raw), so reading on never writes over it
// (lines that cross a block, lines longer than a block, short lines after
// a long one), and an append to one line does not run into the next.
func TestLineReaderNeverWritesAHandedOutLine(t *testing.T) {
	var want []string
	var in strings.Builder
	for i := range 3000 {
		line := fmt.Sprintf("line %d %s", i, strings.Repeat("abcdefgh", i%37))
		switch i {
		case 500, 501:
			line += strings.Repeat("y", 3*readBlock+i)
		case 1500:
			line += strings.Repeat("z", readBlock-100)
		}
		want = append(want, line)
		in.WriteString(line + "\n")
	}
	for _, r := range readers {
		t.Run(r.name, func(t *testing.T) {
			l := NewLineReader(r.wrap(strings.NewReader(in.String())), 1<<20)
			var lines [][]byte
			for {
				line, err := l.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if cap(line) != len(line) {
					t.Fatalf("line %d has room after it (len %d, cap %d): an append would write into the block", len(lines), len(line), cap(line))
				}
				_ = append(line, "XXXXXXXX"...)
				if cap(l.buf) > readBlock && len(line) < readBlock {
					t.Fatalf("after line %d (%d bytes) the reader reads on into a block of %d bytes", len(lines), len(line), cap(l.buf))
				}
				lines = append(lines, line)
			}
			if len(lines) != len(want) {
				t.Fatalf("%d lines, want %d", len(lines), len(want))
			}
			for i, line := range lines {
				if string(line) != want[i] {
					t.Fatalf("line %d was written over after it was handed out: %.40q…, want %.40q…", i, line, want[i])
				}
			}
		})
	}
}
