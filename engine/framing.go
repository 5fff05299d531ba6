package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// DefaultMaxLine bounds one engine output line when Options.MaxLine is zero.
// Pi writes whole messages (message_end, turn_end, agent_end) on one line,
// so the bound is generous; it exists so a runaway engine cannot grow the
// controller's memory without limit.
const DefaultMaxLine = 16 << 20

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
}

// NewLineReader returns a reader over r whose lines may hold at most max
// bytes (DefaultMaxLine if max <= 0), not counting the terminator.
func NewLineReader(r io.Reader, max int) *LineReader {
	if max <= 0 {
		max = DefaultMaxLine
	}
	return &LineReader{r: r, max: max, buf: make([]byte, min(max+1, minRead))}
}

// Next returns the next line without its LF (and without one CR before
// it). The slice is valid until the next call. At end of input a final
// unterminated line is returned first, then io.EOF. A line over the bound
// returns an error wrapping ErrLineTooLong as soon as the bound is passed;
// the rest of that line is skipped and reading continues after it.
func (lr *LineReader) Next() ([]byte, error) {
	for {
		data := lr.buf[lr.start:lr.end]
		if i, w := lineEnd(data[lr.scanned:]); i >= 0 {
			i += lr.scanned
			line := data[:i]
			lr.start += i + w
			lr.scanned = 0
			if lr.discarding {
				lr.discarding = false
				continue
			}
			if len(line) > lr.max {
				return nil, lr.tooLong()
			}
			return trimCR(line), nil
		}
		lr.scanned = len(data)
		if lr.discarding {
			lr.start, lr.end, lr.scanned = 0, 0, 0
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
	return fmt.Errorf("%w: more than %d bytes", ErrLineTooLong, lr.max)
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

// encodeRecord renders one command as exactly one JSONL record. Every
// string stays one JSON string: control characters (ESC included) are
// escaped, and encoding/json always escapes U+2028 and U+2029, so no byte
// of the payload can end or split the record (S7).
func encodeRecord(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode engine command: %w", err)
	}
	if bytes.IndexByte(b.Bytes()[:b.Len()-1], '\n') >= 0 {
		return nil, errors.New("encode engine command: record holds a raw LF")
	}
	return b.Bytes(), nil
}
