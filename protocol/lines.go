package protocol

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// readBlock is the size of the blocks a LineReader reads into and the
// most one read asks for. A line is a slice of its block, so keeping it
// keeps the block: readBlock bytes, or a longer line's own block (see
// LineReader).
const readBlock = 64 << 10

// LineReader reads LF-terminated lines of at most max bytes. Only LF ends
// a line (a CR before it is dropped), so U+2028 inside a JSON string never
// splits a record. Each line is a slice of the block the stream was read
// into, never a buffer read into again: a block is never written again
// where a line was handed out, so a line is the caller's to keep (the
// client's Update.Raw) without a copy. Each line is capped at its own
// length, so an append to one reallocates instead of running into the
// next.
//
// A line that does not fit what is left of its block moves, with nothing
// after it, to a new block of readBlock bytes, or twice its length when
// that is more. Once a line has been handed out from such a larger block,
// what was read after it moves to a new block of readBlock bytes, so no
// other line shares a long line's block.
type LineReader struct {
	r   io.Reader
	max int

	buf     []byte // the block: buf[start:] is read and not handed out
	start   int
	scanned int   // buf[start:scanned] holds no LF
	lf      bool  // buf[scanned] is an LF, found by ready
	err     error // the read error to report once buf is handed out
}

// NewLineReader returns a reader capped at max bytes per line.
func NewLineReader(r io.Reader, max int) *LineReader {
	return &LineReader{r: r, max: max}
}

// Next returns the next line without its LF (and without a trailing CR).
// A last line without LF is returned before io.EOF.
func (l *LineReader) Next() ([]byte, error) {
	for {
		if l.Ready() {
			end := l.scanned
			l.lf = false
			line := l.buf[l.start:end:end]
			if len(line) > l.max {
				return nil, l.tooLong()
			}
			l.start, l.scanned = end+1, end+1
			if cap(l.buf) > readBlock {
				l.moveTo(readBlock)
			}
			if n := len(line); n > 0 && line[n-1] == '\r' {
				line = line[: n-1 : n-1]
			}
			return line, nil
		}
		if len(l.buf)-l.start > l.max {
			return nil, l.tooLong()
		}
		if l.err != nil {
			if errors.Is(l.err, io.EOF) && l.start < len(l.buf) {
				line := l.buf[l.start:len(l.buf):len(l.buf)]
				l.start = len(l.buf)
				return line, nil
			}
			return nil, l.err
		}
		if len(l.buf) == cap(l.buf) {
			l.moveTo(max(readBlock, 2*(len(l.buf)-l.start)))
		}
		n, err := l.r.Read(l.buf[len(l.buf):min(cap(l.buf), len(l.buf)+readBlock)])
		l.buf = l.buf[:len(l.buf)+n]
		l.err = err
	}
}

// Ready says whether a whole line is read, so that Next will not block.
func (l *LineReader) Ready() bool {
	if l.lf {
		return true
	}
	i := bytes.IndexByte(l.buf[l.scanned:], '\n')
	if i < 0 {
		l.scanned = len(l.buf)
		return false
	}
	l.scanned += i
	l.lf = true
	return true
}

// moveTo moves what is not handed out yet to a new block of size bytes.
func (l *LineReader) moveTo(size int) {
	rest := l.buf[l.start:]
	buf := make([]byte, len(rest), max(size, len(rest)))
	copy(buf, rest)
	l.scanned -= l.start
	l.buf, l.start = buf, 0
}

func (l *LineReader) tooLong() error {
	return fmt.Errorf("%w: over %d bytes", ErrLineTooLong, l.max)
}
