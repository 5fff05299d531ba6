package history

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/protocol"
)

// TestCutCount: CutCount is exactly len(Cut) on messages at and across
// every bound its shortcut judges by (blocks per part, a fragment's
// escaped bytes and UTF-16 units, a part's bytes), and on random ones;
// every part Cut makes fits a page with room to spare; CutRange is a
// slice of Cut, whichever.
func TestCutCount(t *testing.T) {
	text := func(s string) protocol.Block { return protocol.Block{Type: "text", Text: s} }
	repeat := func(n int, b protocol.Block) []protocol.Block {
		out := make([]protocol.Block, n)
		for i := range out {
			out[i] = b
		}
		return out
	}
	sure := maxFragmentBytes / maxEsc
	type tcase struct {
		name         string
		blocks       []protocol.Block
		parts, frags int // -1: not known in advance
	}
	cases := []tcase{
		{"no blocks", nil, 1, 0},
		{"a part's blocks", repeat(MaxPartBlocks, text("x")), 1, MaxPartBlocks},
		{"one block more", repeat(MaxPartBlocks+1, text("x")), 2, MaxPartBlocks + 1},
		{"escaped to the fragment bound", []protocol.Block{text(strings.Repeat("<", sure))}, 1, 1},
		{"escaped past it", []protocol.Block{text(strings.Repeat("<", sure+1))}, 1, 2},
		{"escaped past a part", []protocol.Block{text(strings.Repeat("<", 800<<10))}, 2, 5},
		{"plain past the shortcut, within a fragment", []protocol.Block{text(strings.Repeat("x", sure+1))}, 1, 1},
		{"UTF-16 units past a fragment", []protocol.Block{text(strings.Repeat("x", MaxStringChars+1))}, 1, 2},
		{"astral runes", []protocol.Block{text(strings.Repeat("😀", MaxStringChars/2+1))}, 1, 2},
		{"a part's blocks, one of them two fragments", append(repeat(MaxPartBlocks-1, text("x")), text(strings.Repeat("<", 200<<10))), 2, MaxPartBlocks + 1},
		{"blocks past a part's bytes", repeat(30, text(strings.Repeat("x", 170<<10))), 2, 30},
		{"blocks past a part's bytes escaped", repeat(30, text(strings.Repeat("<", 100<<10))), 5, 30},
		{"tool call arguments past a fragment", []protocol.Block{{Type: "toolCall", ToolCallID: "c1", ToolName: "write",
			Args: json.RawMessage(`{"t":"` + strings.Repeat("<", maxFragmentBytes) + `"}`)}}, 2, 7},
	}
	r := rand.New(rand.NewPCG(18, 65))
	alphabet := []string{"x", "<", "é", "😀", "\n", "\u2028", "\xff"}
	for i := range 80 {
		var bs []protocol.Block
		for range r.IntN(80) {
			str := func() string { return strings.Repeat(alphabet[r.IntN(len(alphabet))], r.IntN(1<<r.IntN(19))) }
			name := func() string { return strings.Repeat("n", r.IntN(1<<r.IntN(13))) }
			switch r.IntN(10) {
			case 0, 1:
				bs = append(bs, protocol.Block{Type: "toolCall", ToolCallID: name(), ToolName: name(), Args: json.RawMessage(`"` + str() + `"`)})
			case 2:
				bs = append(bs, protocol.Block{Type: "image", MimeType: name()})
			default:
				bs = append(bs, text(str()))
			}
		}
		cases = append(cases, tcase{"random " + string(rune('a'+i%26)), bs, -1, -1})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := Message{ID: "m1", Role: "assistant", Blocks: tc.blocks}
			ps := Cut(m)
			frags := 0
			for _, p := range ps {
				frags += len(p.Blocks)
			}
			if n := CutCount(m); n != len(ps) || (tc.parts >= 0 && (n != tc.parts || frags != tc.frags)) {
				t.Fatalf("CutCount %d, Cut %d parts of %d fragments, want %d of %d", n, len(ps), frags, tc.parts, tc.frags)
			}
			for _, p := range ps {
				if b, _ := json.Marshal(p); len(b) > MaxPageBytes-maxPartBytes/2 {
					t.Fatalf("part %d is %d bytes", p.Part, len(b))
				}
			}
			n := len(ps)
			for _, r := range [][2]int{{0, n}, {0, 1}, {n - 1, n}, {0, n + 5}, {n / 2, n/2 + 1}, {1, n}, {n, n + 1}, {3, 2}} {
				want := []Part(nil)
				if r[0] < r[1] && r[0] < n {
					want = ps[r[0]:min(r[1], n)]
				}
				if got := CutRange(m, r[0], r[1]); !reflect.DeepEqual(got, want) {
					t.Fatalf("CutRange(%d, %d) is %d parts, not the %d of Cut", r[0], r[1], len(got), len(want))
				}
			}
		})
	}
}

// TestCutKeepsTheToolsName: a message's tool is carried by its id, name
// and error flag, bounded as an entry's are, never with its raw result.
func TestCutKeepsTheToolsName(t *testing.T) {
	long := strings.Repeat("i", maxShort+1)
	ps := Cut(Message{ID: "m1", Role: "toolResult", Tool: &protocol.Tool{CallID: long, Name: "bash", IsError: true,
		Result: json.RawMessage(`"out"`)}, Blocks: []protocol.Block{{Type: "text", Text: "out"}}})
	tool := ps[0].Tool
	if len(ps) != 1 || tool == nil || tool.CallID != hashed(long) || tool.Name != "bash" || !tool.IsError || tool.Result != nil {
		t.Fatalf("parts %+v, tool %+v", ps, tool)
	}
}

// TestCutHashesLongBlockIDs: a block's tool call id, tool name and mime
// type (a Claude transcript's tool_use id and name are the engine's to
// write, of any length up to a line) are replaced by their hash past
// maxShort, as the session reader's blocks are, so no fragment, and so no
// part or page, outgrows the caps by them.
func TestCutHashesLongBlockIDs(t *testing.T) {
	id, name, mime := strings.Repeat("i", 5<<20), strings.Repeat("n", 5<<20), strings.Repeat("m", 9<<20)
	m := Message{ID: "m1", Role: "assistant", Blocks: []protocol.Block{
		{Type: "toolCall", ToolCallID: id, ToolName: name, Args: json.RawMessage(`{"a":1}`)},
		{Type: "toolCall", ToolCallID: id, ToolName: name, Args: json.RawMessage(`"` + strings.Repeat("a", 3<<20) + `"`)},
		{Type: "image", MimeType: mime},
		{Type: "toolCall", ToolCallID: "c1", ToolName: "bash", Args: json.RawMessage(`{}`)},
	}}
	ps := Cut(m)
	if n := CutCount(m); n != len(ps) {
		t.Fatalf("CutCount %d, Cut %d parts", n, len(ps))
	}
	for _, p := range ps {
		if b, _ := json.Marshal(p); len(b) > MaxPageBytes-maxPartBytes/2 {
			t.Fatalf("part %d is %d bytes", p.Part, len(b))
		}
		for _, f := range p.Blocks {
			c := f.Content
			want := map[int][3]string{0: {hashed(id), hashed(name), ""}, 1: {hashed(id), hashed(name), ""}, 2: {"", "", hashed(mime)}, 3: {"c1", "bash", ""}}[f.Block]
			if got := [3]string{c.ToolCallID, c.ToolName, c.MimeType}; got != want {
				t.Fatalf("block %d fragment %d: id, name, mime type %.40q, want %.40q", f.Block, f.Fragment, got, want)
			}
		}
	}
	if m.Blocks[0].ToolName != name {
		t.Fatal("Cut changed the message it was given")
	}
}
