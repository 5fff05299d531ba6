package client

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/mosaic-agents/mosaic/protocol"
)

// readBlock is the size of the blocks the read loop reads the socket into
// and the most one read asks for. A line's Raw is a slice of its block,
// so keeping it keeps the block: readBlock bytes, or a longer line's own
// block (see lineReader).
const readBlock = 64 << 10

// lineReader reads LF-terminated server lines of at most max bytes, as
// protocol.LineReader does, but hands out each line as a slice of the
// block the socket was read into rather than of a buffer it reads into
// again: a block is never written again where a line was handed out, so a
// line is the caller's to keep (an Update's Raw) without a copy. Each line
// is capped at its own length, so an append to one reallocates instead of
// running into the next.
//
// A line that does not fit what is left of its block moves, with nothing
// after it, to a new block of readBlock bytes, or twice its length when
// that is more. Once a line has been handed out from such a larger block,
// what was read after it moves to a new block of readBlock bytes, so no
// other line shares a long line's block.
type lineReader struct {
	r   io.Reader
	max int

	buf     []byte // the block: buf[start:] is read and not handed out
	start   int
	scanned int   // buf[start:scanned] holds no LF
	lf      bool  // buf[scanned] is an LF, found by ready
	err     error // the read error to report once buf is handed out
}

func newLineReader(r io.Reader, max int) *lineReader {
	return &lineReader{r: r, max: max}
}

// next returns the next line without its LF (and without a trailing CR).
// A last line without LF is returned before io.EOF.
func (l *lineReader) next() ([]byte, error) {
	for {
		if l.ready() {
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

// ready says whether a whole line is read, so that next will not block.
func (l *lineReader) ready() bool {
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
func (l *lineReader) moveTo(size int) {
	rest := l.buf[l.start:]
	buf := make([]byte, len(rest), max(size, len(rest)))
	copy(buf, rest)
	l.scanned -= l.start
	l.buf, l.start = buf, 0
}

func (l *lineReader) tooLong() error {
	return fmt.Errorf("%w: over %d bytes", protocol.ErrLineTooLong, l.max)
}
