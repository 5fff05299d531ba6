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

// scan parses the lines of f from its offset on (t.size, line t.lines+1),
// feeding every byte to h, which holds the digest of the bytes before
// them, and records where the read ended and what it covered. It reads at
// most up to the history reader's size limit, all of it at once (as Pi's
// reader does): decoding a line with encoding/json costs about ninety
// times splitting it, and needs nothing of the lines before it, so the
// lines of a large read are decoded on several goroutines and then
// applied in file order, exactly as one at a time.
func (t *Transcript) scan(f *os.File, h hash.Hash) error {
	data, err := io.ReadAll(io.LimitReader(f, history.DefaultMaxSize+1-t.size))
	if err != nil {
		return protocol.Wrap(protocol.CodeUnreadable, err, "read claude transcript %s", t.path)
	}
	h.Write(data)
	lines, tooLong := splitLines(data, MaxLine)
	ds := decodeAll(lines, len(data))
	for i := range ds {
		t.lines++
		if err := t.apply(&ds[i], t.lines); err != nil {
			return err
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

// splitLines splits data as a bufio.Scanner of ScanLines with a max
// token size of max does (one line per LF, a final line without one, a
// CR before the LF dropped), and says whether it stopped at a line the
// scanner would refuse as too long: one of max bytes or more, which with
// or without its LF fills the scanner's largest buffer.
func splitLines(data []byte, max int) (lines [][]byte, tooLong bool) {
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		end := i
		if i < 0 {
			end = len(data)
		}
		if end >= max {
			return lines, true
		}
		lines = append(lines, dropCR(data[:end]))
		if i < 0 {
			break
		}
		data = data[i+1:]
	}
	return lines, false
}

func dropCR(b []byte) []byte {
	if len(b) > 0 && b[len(b)-1] == '\r' {
		return b[:len(b)-1]
	}
	return b
}

// decodeAll decodes lines, in parallel when they are size bytes or more,
// each worker a run of neighbouring lines.
func decodeAll(lines [][]byte, size int) []decoded {
	ds := make([]decoded, len(lines))
	workers := min(runtime.GOMAXPROCS(0), scanWorkers)
	if size < parallelMin || workers < 2 {
		for i, b := range lines {
			ds[i] = decode(b)
		}
		return ds
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
	return ds
}
