package history

import "github.com/mosaic-agents/mosaic/protocol"

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
	base := Part{Entry: entryKey(m.ID), Native: short(m.ID), Kind: "message", Role: short(m.Role)}
	if m.Tool != nil {
		base.Tool = &protocol.Tool{CallID: short(m.Tool.CallID), Name: short(m.Tool.Name), IsError: m.Tool.IsError}
	}
	frags, sizes := cutBlocks(shortBlocks(m.Blocks))
	return cutParts(base, frags, sizes)
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
// being cut: counting the parts of a long transcript costs a pass over
// its messages, not over their text.
func CutCount(m Message) int {
	if len(m.Blocks) <= MaxPartBlocks {
		total := 0
		for _, b := range m.Blocks {
			if !fragmentSure(b.Text) || !fragmentSure(string(b.Args)) {
				return len(Cut(m))
			}
			total += maxEsc*(len(b.Text)+len(b.Args)+len(b.ToolCallID)+len(b.ToolName)+len(b.MimeType)) + fragmentOverhead
		}
		if total <= maxPartBytes {
			return 1
		}
	}
	return len(Cut(m))
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
