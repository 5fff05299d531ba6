package engine

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// DefaultMaxLine bounds the engine output line held whole in memory when
// Options.MaxLine is zero. Pi writes whole messages (message_end,
// turn_end, agent_end) on one line; a longer line is not refused but
// reduced as it streams in (reduce.go), up to DefaultLineLimit.
const DefaultMaxLine = 1 << 20

// DefaultLineLimit is the longest engine line read at all when
// Options.LineLimit is zero: the history reader's file limit, since Pi
// writes nothing on one line that its session file could not hold.
const DefaultLineLimit = 256 << 20

// ErrLineTooLong is wrapped by the error a LineReader returns for a line
// over its bound. The line's bytes are discarded up to the next LF, so the
// caller must treat the binding as uncertain: something was lost.
var ErrLineTooLong = errors.New("engine line exceeds the framing bound")

const minRead = 32 << 10

// LineReader splits an engine's stdout into records the way pinned Pi's own
// reader does (dist/modes/rpc/jsonl.js): on LF only, dropping one trailing
// CR. It never splits on U+2028 or U+2029, which JSON allows raw inside
// strings, so it is not bufio.ScanLines-with-Unicode or Node readline.
// It works on bytes, so a UTF-8 sequence split across reads stays whole
// (LF never occurs inside a multi-byte sequence).
type LineReader struct {
	r          io.Reader
	max        int
	buf        []byte
	start, end int // pending bytes are buf[start:end]
	scanned    int // bytes of the pending data already known to hold no LF
	discarding bool
	err        error
	// limit > max streams a line longer than max through reduce instead
	// of refusing it, up to limit bytes; clip describes the last line.
	limit int64
	clip  *Clip
	// partial, when set, is called once the bytes before the first LF
	// were skipped (SkipPartial), with their count.
	partial func(skipped int64)
	skipped int64
}

// NewLineReader returns a reader over r whose lines may hold at most max
// bytes (DefaultMaxLine if max <= 0), not counting the terminator.
func NewLineReader(r io.Reader, max int) *LineReader {
	if max <= 0 {
		max = DefaultMaxLine
	}
	return &LineReader{r: r, max: max, buf: make([]byte, min(max+1, minRead))}
}

// Reduce makes lines longer than the reader's bound and at most limit
// bytes come back reduced (strings cut, see reduce) instead of refused,
// read as a stream so no more than the bound plus the reduced copy is ever
// held. Clip then describes what the last line lost.
func (lr *LineReader) Reduce(limit int64) {
	lr.limit = limit
}

// SkipPartial makes the reader skip everything up to and including the
// first LF before it returns any line, and then call done with the number
// of bytes skipped. It is for a stream joined in the middle (a controller
// re-attached to a running engine's stdout after a restart): what comes
// before the first LF may be the tail of a line whose head another reader
// consumed, and a tail can be valid JSON that means something else, so it
// is never parsed. A whole line that happened to come first is skipped too;
// the caller reconciles from what it can prove. Call before the first
// Next.
func (lr *LineReader) SkipPartial(done func(skipped int64)) {
	lr.discarding = true
	lr.partial = done
}

// Clip describes what Next cut from the line it returned last; nil for a
// line returned whole.
func (lr *LineReader) Clip() *Clip { return lr.clip }

// Next returns the next line without its LF (and without one CR before
// it). The slice is valid until the next call. At end of input a final
// unterminated line is returned first, then io.EOF. A line over the bound
// returns an error wrapping ErrLineTooLong as soon as the bound is passed;
// the rest of that line is skipped and reading continues after it.
func (lr *LineReader) Next() ([]byte, error) {
	lr.clip = nil
	for {
		data := lr.buf[lr.start:lr.end]
		if i, w := lineEnd(data[lr.scanned:]); i >= 0 {
			i += lr.scanned
			if !lr.discarding && i > lr.max && lr.limit > int64(lr.max) {
				lr.scanned = 0
				return lr.stream()
			}
			line := data[:i]
			lr.start += i + w
			lr.scanned = 0
			if lr.discarding {
				lr.discarding = false
				lr.skippedPartial(int64(i + w))
				continue
			}
			if len(line) > lr.max {
				return nil, lr.tooLong()
			}
			return trimCR(line), nil
		}
		lr.scanned = len(data)
		if lr.discarding {
			if lr.partial != nil {
				lr.skipped += int64(len(data))
			}
			lr.start, lr.end, lr.scanned = 0, 0, 0
		} else if len(data) > lr.max && lr.limit > int64(lr.max) {
			lr.scanned = 0
			return lr.stream()
		} else if len(data) > lr.max {
			lr.discarding = true
			lr.start, lr.end, lr.scanned = 0, 0, 0
			return nil, lr.tooLong()
		}
		if lr.err != nil {
			return lr.drain()
		}
		lr.fill()
	}
}

// skippedPartial ends a SkipPartial (n more bytes skipped up to its LF);
// a discard of an over-long line does not call it.
func (lr *LineReader) skippedPartial(n int64) {
	if f := lr.partial; f != nil {
		lr.partial = nil
		f(lr.skipped + n)
	}
}

// lineEnd finds the first record terminator in b: its index and width.
// Only LF terminates a record.
func lineEnd(b []byte) (int, int) {
	return bytes.IndexByte(b, '\n'), 1
}

func trimCR(line []byte) []byte {
	if n := len(line); n > 0 && line[n-1] == '\r' {
		return line[:n-1]
	}
	return line
}

func (lr *LineReader) tooLong() error {
	return fmt.Errorf("%w: more than %d bytes", ErrLineTooLong, max(int64(lr.max), lr.limit))
}

// stream reduces the line that starts at lr.start. A line past the limit
// is skipped to its LF like any line too long; one that does not reduce
// (not one JSON value, or too much structure) is skipped and reported
// with ErrReduce, so its reader marks the binding uncertain either way.
func (lr *LineReader) stream() ([]byte, error) {
	body := &lineBody{lr: lr}
	out, clip, err := reduce(body)
	if err == nil && body.err == nil {
		// Whatever follows the value before the LF was read by reduce
		// (white space only); the body is at its end.
		clip.Bytes = body.n
		lr.clip = clip
		return out, nil
	}
	if body.err == nil {
		err = fmt.Errorf("%w (line of at least %d bytes)", err, body.n)
		_, body.err = io.Copy(io.Discard, body)
	}
	if body.err != nil && !errors.Is(body.err, io.EOF) {
		err = body.err
	}
	if !body.done {
		lr.discarding = true
	}
	return nil, err
}

// lineBody reads the rest of the current line from the LineReader's
// buffer and source, ending (io.EOF) at its LF, which it consumes; past
// the limit it fails with ErrLineTooLong and leaves the rest unread.
type lineBody struct {
	lr   *LineReader
	n    int64
	done bool
	err  error
}

func (b *lineBody) Read(p []byte) (int, error) {
	lr := b.lr
	for {
		if b.err != nil {
			return 0, b.err
		}
		if b.done {
			return 0, io.EOF
		}
		data := lr.buf[lr.start:lr.end]
		if len(data) > 0 {
			chunk := data
			i, w := lineEnd(data)
			if i >= 0 {
				chunk = data[:i]
			}
			k := copy(p, chunk)
			lr.start += k
			b.n += int64(k)
			if i >= 0 && k == i {
				lr.start += w // the terminator
				b.done = true
			}
			if b.n > lr.limit {
				b.err = lr.tooLong()
				return 0, b.err
			}
			if k > 0 {
				return k, nil
			}
			continue
		}
		if lr.err != nil {
			b.done = true // a final line without LF
			continue
		}
		lr.start, lr.end = 0, 0
		lr.fill()
	}
}

// drain hands out the unterminated tail once input has ended, then the
// sticky read error.
func (lr *LineReader) drain() ([]byte, error) {
	if lr.discarding || lr.end == lr.start {
		lr.discarding = false
		lr.start, lr.end, lr.scanned = 0, 0, 0
		return nil, lr.err
	}
	line := lr.buf[lr.start:lr.end]
	lr.start, lr.scanned = lr.end, 0
	return trimCR(line), nil
}

// fill makes room and reads once, keeping the buffer no larger than the
// bound plus one read.
func (lr *LineReader) fill() {
	if lr.start > 0 {
		n := copy(lr.buf, lr.buf[lr.start:lr.end])
		lr.start, lr.end = 0, n
	}
	if lr.end == len(lr.buf) {
		grown := make([]byte, min(2*len(lr.buf), lr.max+minRead))
		copy(grown, lr.buf[:lr.end])
		lr.buf = grown
	}
	n, err := lr.r.Read(lr.buf[lr.end:])
	lr.end += n
	if err != nil {
		lr.err = err
	}
}
