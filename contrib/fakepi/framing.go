package fakepi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// lineReader splits stdin into records on LF only, as Pi's jsonl reader
// does: U+2028/U+2029 inside a JSON string never end a record, a trailing
// CR is dropped, and a last line without LF still counts at EOF. Every byte
// read is also copied to log (the evidence file), exactly as read.
type lineReader struct {
	r   io.Reader
	log io.Writer
	buf []byte
	eof bool
}

func (lr *lineReader) next() ([]byte, error) {
	for {
		if i := bytes.IndexByte(lr.buf, '\n'); i >= 0 {
			line := lr.buf[:i]
			lr.buf = lr.buf[i+1:]
			return bytes.TrimSuffix(line, []byte{'\r'}), nil
		}
		if lr.eof {
			if len(lr.buf) > 0 {
				line := lr.buf
				lr.buf = nil
				return bytes.TrimSuffix(line, []byte{'\r'}), nil
			}
			return nil, io.EOF
		}
		chunk := make([]byte, 64<<10)
		n, err := lr.r.Read(chunk)
		if n > 0 {
			if lr.log != nil {
				if _, werr := lr.log.Write(chunk[:n]); werr != nil {
					return nil, fmt.Errorf("stdin log: %w", werr)
				}
			}
			lr.buf = append(lr.buf, chunk[:n]...)
		}
		if errors.Is(err, io.EOF) {
			lr.eof = true
		} else if err != nil {
			return nil, fmt.Errorf("read stdin: %w", err)
		}
	}
}
