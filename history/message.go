package history

import (
	"iter"

	"github.com/mosaic-agents/mosaic/protocol"
)

// Message is one message of a transcript that is not a Pi session (a
// Claude conversation's), for Cut.
type Message struct {
	ID, Role string
	Tool     *protocol.Tool
	Blocks   []protocol.Block
}

// Cut cuts m into page parts as a session entry is cut (its strings into
// fragments, its fragments into parts of at most MaxPartBlocks and about
// maxPartBytes of JSON), so that no part, and so no page, outgrows the
// caps whatever the message holds: an engine's tool can write a result of
// any size. The tool keeps its call id, name and error flag, not its
// result, whose text the blocks already carry; ids and the role are
// bounded as an entry's are, and so are the blocks' tool call ids, tool
// names and mime types (the session reader's block does the same), which
// every fragment of a block carries and no fragment cut shortens.
func Cut(m Message) []Part {
	frags, sizes := cutBlocks(shortBlocks(m.Blocks))
	return cutParts(cutBase(m), frags, sizes)
}

// cutBase is what every part of m carries besides its blocks.
func cutBase(m Message) Part {
	base := Part{Entry: entryKey(m.ID), Native: short(m.ID), Kind: "message", Role: short(m.Role)}
	if m.Tool != nil {
		base.Tool = &protocol.Tool{CallID: short(m.Tool.CallID), Name: short(m.Tool.Name), IsError: m.Tool.IsError}
	}
	return base
}

// CutRange is Cut(m)[from:to], to clipped to the parts there are (none
// when from is past them), made without making the parts outside it: a
// page of a message of thousands of parts costs a pass over the message
// and the parts it shows, not every part of it, page after page.
func CutRange(m Message, from, to int) []Part {
	if from >= to {
		return nil
	}
	base := cutBase(m)
	var out []Part
	for part, f := range partFragments(shortBlocks(m.Blocks)) {
		if part >= to {
			return out
		}
		if part < from {
			continue
		}
		if len(out) == 0 || out[len(out)-1].Part != part {
			p := base
			p.Part = part
			out = append(out, p)
		}
		p := &out[len(out)-1]
		p.Blocks = append(p.Blocks, f)
	}
	if from == 0 && len(out) == 0 {
		out = append(out, base) // a message of no blocks: one part of none
	}
	if len(out) > 0 {
		out[len(out)-1].LastPart = true
	}
	return out
}

// partFragments yields the index of the part cutParts puts each
// fragment cutBlocks cuts blocks into, with the fragment: the grouping
// of both, fragment by fragment, without a slice of them.
func partFragments(blocks []protocol.Block) iter.Seq2[int, Fragment] {
	return func(yield func(int, Fragment) bool) {
		var open parter
		part := 0
		for i, b := range blocks {
			for f, size := range fragments(i, b) {
				if open.add(size) {
					part++
				}
				if !yield(part, f) {
					return
				}
			}
		}
	}
}

// shortBlocks returns blocks with every id, name and mime type longer
// than maxShort replaced by its hash: a copy when one is, blocks itself
// when none is.
func shortBlocks(blocks []protocol.Block) []protocol.Block {
	out := blocks
	for i, b := range blocks {
		if len(b.ToolCallID) <= maxShort && len(b.ToolName) <= maxShort && len(b.MimeType) <= maxShort {
			continue
		}
		if &out[0] == &blocks[0] {
			out = append([]protocol.Block(nil), blocks...)
		}
		out[i].ToolCallID, out[i].ToolName, out[i].MimeType = short(b.ToolCallID), short(b.ToolName), short(b.MimeType)
	}
	return out
}

// CutCount is len(Cut(m)). A message of at most MaxPartBlocks blocks
// whose every string is short enough that even escaped six bytes to the
// byte it fits a fragment, and all of them one part, is one part without
// a look at its text (the hash of a name past maxShort is never longer
// than the name): counting the parts of a long transcript costs a pass over
// its messages, not over their text.
func CutCount(m Message) int {
	if len(m.Blocks) <= MaxPartBlocks {
		total := 0
		for _, b := range m.Blocks {
			if !fragmentSure(b.Text) || !fragmentSure(string(b.Args)) {
				return countParts(m)
			}
			total += maxEsc*(len(b.Text)+len(b.Args)+len(b.ToolCallID)+len(b.ToolName)+len(b.MimeType)) + fragmentOverhead
		}
		if total <= maxPartBytes {
			return 1
		}
	}
	return countParts(m)
}

// countParts is len(Cut(m)), counted without making a part: a message
// of a million blocks is a pass over them, not a gigabyte of fragments.
func countParts(m Message) int {
	n := 1
	for part := range partFragments(shortBlocks(m.Blocks)) {
		n = part + 1
	}
	return n
}

// maxEsc is the most bytes encoding/json writes for one byte of a string
// (a control character, an HTML character or an invalid byte as \uXXXX).
const maxEsc = 6

// fragmentSure says s fits one fragment by its length alone: its UTF-16
// units are never more than its bytes, its escaped form never more than
// maxEsc times them.
func fragmentSure(s string) bool {
	return len(s) <= MaxStringChars && maxEsc*len(s) <= maxFragmentBytes
}
