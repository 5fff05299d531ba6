package claude

import (
	"bufio"
	"bytes"
	"hash"
	"io"
	"os"
	"runtime"
	"sync"

	"github.com/mosaic-agents/mosaic/history"
	"github.com/mosaic-agents/mosaic/protocol"
)

// parallelMin is the least a scan reads before it decodes its lines on
// more than one goroutine; scanWorkers bounds how many.
var parallelMin = 1 << 20

const scanWorkers = 4

// scanBatch is how many lines a scan decodes before it applies them. A
// decoded line costs some three hundred bytes however short the line, so
// a file of blank or tiny lines decoded all before any is applied would
// cost a hundred times its size: a batch bounds that cost whatever the
// file holds.
var scanBatch = 4096

// scan parses the lines of f from its offset on (t.size, line t.lines+1),
// feeding every byte to h, which holds the digest of the bytes before
// them, and records where the read ended and what it covered. It reads at
// most up to the history reader's size limit, all of it at once (as Pi's
// reader does): decoding a line with encoding/json costs about ninety
// times splitting it, and needs nothing of the lines before it, so the
// lines of a large read are decoded on several goroutines, a batch at a
// time, and then applied in file order, exactly as one at a time.
func (t *Transcript) scan(f *os.File, h hash.Hash) error {
	return t.scanUpTo(f, h, history.DefaultMaxSize+1-t.size)
}

// scanUpTo is scan reading at most limit bytes (ReadPrefix).
func (t *Transcript) scanUpTo(f *os.File, h hash.Hash, limit int64) error {
	data, err := readRest(f, limit)
	if err != nil {
		return protocol.Wrap(protocol.CodeUnreadable, err, "read claude transcript %s", t.path)
	}
	h.Write(data)
	workers := 1
	if len(data) >= parallelMin {
		workers = min(runtime.GOMAXPROCS(0), scanWorkers)
	}
	batch := min(scanBatch, bytes.Count(data, []byte{'\n'})+1)
	lines, ds := make([][]byte, 0, batch), make([]decoded, batch)
	rest, tooLong := data, false
	for len(rest) > 0 && !tooLong {
		lines, rest, tooLong = splitLines(lines[:0], rest, MaxLine, batch)
		decodeAll(ds[:len(lines)], lines, workers)
		for i := range lines {
			t.lines++
			if err := t.apply(&ds[i], t.lines); err != nil {
				return err
			}
			ds[i] = decoded{} // applied: what it holds is the transcript's now, or garbage
		}
	}
	if tooLong {
		return protocol.Wrap(protocol.CodeUnreadable, bufio.ErrTooLong, "read claude transcript %s", t.path)
	}
	t.size += int64(len(data))
	if t.size > history.DefaultMaxSize {
		return protocol.Refuse(protocol.CodeTooLarge, "claude transcript %s grew over %d bytes", t.path, history.DefaultMaxSize)
	}
	t.partial = len(data) > 0 && data[len(data)-1] != '\n'
	t.digest = h.Sum(nil)
	return nil
}

// readRest reads f from its offset to its end, at most limit bytes, into a
// buffer sized from the file's size (the file may still grow: the buffer
// then grows too). io.ReadAll starts from 512 bytes and copies and clears
// every larger buffer it grows to, on one goroutine while the decoding
// waits for the whole read.
func readRest(f *os.File, limit int64) ([]byte, error) {
	var hint int64
	if fi, err := f.Stat(); err == nil {
		if off, err := f.Seek(0, io.SeekCurrent); err == nil {
			hint = max(fi.Size()-off, 0)
		}
	}
	buf := bytes.NewBuffer(make([]byte, 0, min(hint, limit)+bytes.MinRead))
	_, err := buf.ReadFrom(io.LimitReader(f, limit))
	return buf.Bytes(), err
}

// splitLines appends to lines at most n lines of data, split as a
// bufio.Scanner of ScanLines with a max token size of max splits them
// (one line per LF, a final line without one, a CR before the LF
// dropped), and returns the data after them. tooLong says it stopped at
// a line the scanner would refuse as too long: one of max bytes or more,
// which with or without its LF fills the scanner's largest buffer.
func splitLines(lines [][]byte, data []byte, max, n int) (_ [][]byte, rest []byte, tooLong bool) {
	for k := 0; k < n && len(data) > 0; k++ {
		i := bytes.IndexByte(data, '\n')
		end := i
		if i < 0 {
			end = len(data)
		}
		if end >= max {
			return lines, nil, true
		}
		lines = append(lines, dropCR(data[:end]))
		if i < 0 {
			return lines, nil, false
		}
		data = data[i+1:]
	}
	return lines, data, false
}

func dropCR(b []byte) []byte {
	if len(b) > 0 && b[len(b)-1] == '\r' {
		return b[:len(b)-1]
	}
	return b
}

// decodeAll decodes lines into ds, on up to workers goroutines, each a
// run of neighbouring lines.
func decodeAll(ds []decoded, lines [][]byte, workers int) {
	if workers < 2 {
		for i, b := range lines {
			ds[i] = decode(b)
		}
		return
	}
	per := (len(lines) + workers - 1) / workers
	var wg sync.WaitGroup
	for lo := 0; lo < len(lines); lo += per {
		hi := min(lo+per, len(lines))
		wg.Go(func() {
			for i := lo; i < hi; i++ {
				ds[i] = decode(lines[i])
			}
		})
	}
	wg.Wait()
}
