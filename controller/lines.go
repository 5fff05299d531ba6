package controller

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/mosaic-agents/mosaic/protocol"
)

// errBuffers means the bytes held for partial lines of all connections
// reached the server's cap: the connection that needed more is closed.
var errBuffers = errors.New("partial-line buffers of all connections are full")

// Line buffer sizes: every connection starts with a small buffer and grows
// it, against the server's budget, only while a line does not fit.
const (
	lineChunk = 4 << 10
)

// budget is the server's cap on bytes held for client lines across all
// connections. A connection reserves what its buffer holds beyond the
// first chunk and gives it back when the line is done or it closes.
type budget struct {
	mu   sync.Mutex
	used int64
	max  int64
}

func (b *budget) take(n int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+int64(n) > b.max {
		return false
	}
	b.used += int64(n)
	return true
}

func (b *budget) give(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= int64(n)
}

// inUse reports the bytes reserved now.
func (b *budget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// lineReader reads LF-terminated client lines of at most max bytes (only
// LF ends a line; a CR before it is dropped), holding at most one line's
// bytes, reserved from a budget shared by every connection. It serves
// the server side instead of protocol.LineReader, whose blocks of 64 KiB
// per connection, each kept while a line of it is, add up across
// connections.
type lineReader struct {
	r        io.Reader
	max      int
	b        *budget
	buf      []byte
	off, end int // buf[off:end] is read and not yet returned
	held     int // bytes of buf reserved from b
}

func newLineReader(r io.Reader, max int, b *budget) *lineReader {
	return &lineReader{r: r, max: max, b: b, buf: make([]byte, lineChunk)}
}

// Next returns the next line without its LF (and a trailing CR). The slice
// is valid until the next call. A last line without LF is returned before
// io.EOF.
func (l *lineReader) Next() ([]byte, error) {
	scanned := 0
	for {
		if i := bytes.IndexByte(l.buf[l.off+scanned:l.end], '\n'); i >= 0 {
			n := scanned + i
			if n > l.max {
				return nil, fmt.Errorf("%w: over %d bytes", protocol.ErrLineTooLong, l.max)
			}
			line := l.buf[l.off : l.off+n]
			l.off += n + 1
			return bytes.TrimSuffix(line, []byte{'\r'}), nil
		}
		scanned = l.end - l.off
		if scanned > l.max {
			return nil, fmt.Errorf("%w: over %d bytes", protocol.ErrLineTooLong, l.max)
		}
		if err := l.room(); err != nil {
			return nil, err
		}
		n, err := l.r.Read(l.buf[l.end:])
		l.end += n
		if err != nil && n == 0 {
			if errors.Is(err, io.EOF) && l.end > l.off {
				line := l.buf[l.off:l.end]
				l.off = l.end
				return line, nil
			}
			return nil, err
		}
	}
}

// room makes space after end: it moves the pending bytes to the front, and
// when the buffer is full it grows it (doubling, up to max+1 bytes) against
// the budget. A buffer that grew shrinks back once it holds little.
func (l *lineReader) room() error {
	pending := l.end - l.off
	if l.off > 0 {
		copy(l.buf, l.buf[l.off:l.end])
		l.off, l.end = 0, pending
	}
	if pending <= lineChunk/2 && len(l.buf) > lineChunk {
		l.release()
		nb := make([]byte, lineChunk)
		copy(nb, l.buf[:pending])
		l.buf = nb
	}
	if l.end < len(l.buf) {
		return nil
	}
	size := min(2*len(l.buf), l.max+2) // the line, its CR... and one byte more, to see it is too long
	if size <= len(l.buf) {
		return nil // Next refuses the line as too long
	}
	if !l.b.take(size - lineChunk - l.held) {
		return errBuffers
	}
	l.held = size - lineChunk
	nb := make([]byte, size)
	copy(nb, l.buf[:l.end])
	l.buf = nb
	return nil
}

// release gives the reserved bytes back; the caller drops the buffer.
func (l *lineReader) release() {
	if l.held > 0 {
		l.b.give(l.held)
		l.held = 0
	}
}

// Close releases what the reader holds.
func (l *lineReader) Close() {
	l.release()
	l.buf = nil
}
