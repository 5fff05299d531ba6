package client

// rawBlock is the size of the blocks short lines are copied into, and
// rawShort the longest line that shares one: a line longer than that gets
// its own copy, so keeping a short line's Raw keeps at most rawBlock bytes.
const (
	rawBlock = 8 << 10
	rawShort = 1 << 10
)

// rawBlocks copies lines into shared blocks. A block is never written
// again where a copy was handed out: each copy is capped at its own
// length, so an append to one Raw reallocates instead of running into the
// next line.
type rawBlocks struct {
	block []byte
}

func (r *rawBlocks) copy(line []byte) []byte {
	if len(line) > rawShort {
		return append([]byte(nil), line...)
	}
	if cap(r.block)-len(r.block) < len(line) {
		r.block = make([]byte, 0, rawBlock)
	}
	start := len(r.block)
	r.block = append(r.block, line...)
	return r.block[start:len(r.block):len(r.block)]
}
