package controller

import (
	"bytes"
	"math"

	"github.com/mosaic-agents/mosaic/protocol"
)

// A reader behind by several deltas of one block gets them as one line
// (protocol.Event.Texts) when its hello named protocol.RunsSince: the
// run's line is the first delta's line up to its text, then every
// delta's text as the ring already holds it encoded, so joining copies
// bytes and encodes nothing. Each delta keeps its seq and fragment (the
// first's plus its place in the run): the ring, the lag bounds, a
// lost-place notice and a resume with fromSeq still count events one by
// one.

// textKey is where a joinable delta's text starts in its line: its key,
// then the text, which is the line's last value.
var textKey = []byte(`,"text":"`)

// runMark is what publish notes of a delta that may join a run: where
// textKey starts in its line (0: it joins none) and what its neighbour
// must share with it. The key is shared by the deltas of a block, so a
// mark is a few words: writers copy one per event they take.
type runMark struct {
	at   int32
	frag int32
	key  *runKey
}

// runKey is what the deltas of one run share: the line up to the text
// differs only in seq and fragment.
type runKey struct {
	kind                     protocol.EventKind
	message, role, blockType string
	block                    int
}

// markOf returns the run mark of ev, encoded as line: a delta a run may
// hold (protocol.Event.RunDelta) with a text of its own, which is then
// the line's last value, so the line ends `"}`. last is the key of the
// event published before it, taken again when ev shares it.
func markOf(ev *protocol.Event, line []byte, last *runKey) runMark {
	switch {
	case !ev.RunDelta(), ev.Text == "", ev.Texts != nil,
		*ev.Fragment < 0 || *ev.Fragment >= math.MaxInt32, len(line) >= math.MaxInt32,
		!bytes.HasSuffix(line, []byte("\"}\n")):
		return runMark{}
	}
	// Every string before the text is escaped, so its quotes follow a
	// backslash and the first textKey is the key itself.
	at := bytes.Index(line, textKey)
	if at <= 0 {
		return runMark{}
	}
	key := runKey{kind: ev.Kind, message: ev.Message, role: ev.Role, blockType: ev.BlockType, block: *ev.Block}
	if last == nil || *last != key {
		last = &key
	}
	return runMark{at: int32(at), frag: int32(*ev.Fragment), key: last}
}

// piece is one event a writer took from the ring, with its seq and run
// mark (zero for a replaced execution's lines).
type piece struct {
	line []byte
	seq  uint64
	mark runMark
}

// joins says whether b continues a's run: the next seq and fragment of
// the same block.
func joins(a, b *piece) bool {
	return a.mark.at > 0 && b.mark.at > 0 && b.seq == a.seq+1 && b.mark.frag == a.mark.frag+1 && *a.mark.key == *b.mark.key
}

// joinRuns appends to lines the lines a connection writes for pieces:
// runs of two or more deltas joined into one line built in buf, every
// other piece as it is. It returns lines and buf, which the lines built
// point into: buf may be reused once they are written.
func joinRuns(pieces []piece, lines [][]byte, buf []byte) ([][]byte, []byte) {
	for i := 0; i < len(pieces); {
		j := i + 1
		for j < len(pieces) && joins(&pieces[j-1], &pieces[j]) {
			j++
		}
		if j-i < 2 {
			lines = append(lines, pieces[i].line)
			i = j
			continue
		}
		start := len(buf)
		first := &pieces[i]
		buf = append(buf, first.line[:first.mark.at]...)
		buf = append(buf, `,"texts":[`...)
		for k := i; k < j; k++ {
			if k > i {
				buf = append(buf, ',')
			}
			p := &pieces[k]
			// The text with its quotes: from the quote textKey ends
			// with to the one before the closing brace.
			buf = append(buf, p.line[int(p.mark.at)+len(textKey)-1:len(p.line)-2]...)
		}
		buf = append(buf, "]}\n"...)
		lines = append(lines, buf[start:len(buf):len(buf)])
		i = j
	}
	return lines, buf
}

// linesOf returns the lines a writer writes for pieces: their own, or
// with runs joined.
func linesOf(pieces []piece, lines [][]byte, buf []byte, runs bool) ([][]byte, []byte) {
	if runs {
		return joinRuns(pieces, lines, buf)
	}
	for i := range pieces {
		lines = append(lines, pieces[i].line)
	}
	return lines, buf
}
