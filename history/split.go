package history

import (
	"iter"
	"unicode/utf8"

	"github.com/mosaic-agents/mosaic/protocol"
)

// CHAT-01 limits (contract 004) and the seed's finer cuts that make sure
// one part always fits one page.
const (
	MaxPageParts     = 100
	MaxPageBytes     = 8 << 20
	MaxPartBlocks    = 64
	MaxStringChars   = 262144
	maxFragmentBytes = 1 << 20
	maxPartBytes     = 4 << 20
	// fragmentOverhead bounds a fragment's JSON besides its strings.
	fragmentOverhead = 256
	// argsDepth is how deep a fragment's arguments sit in the record that
	// carries its page (observed or page: record, page, parts, part,
	// blocks, fragment, content).
	argsDepth = 7
)

// Fragment is one piece of a content block. Content is exactly the
// protocol.Block a live message-end carries, so a client renders history
// and live messages with one code path; Block, Fragment and LastFragment
// address the piece (contract 004: block ordinals from zero per message,
// fragments from zero per block, contiguous across parts).
//
// A toolCall block whose arguments do not fit one fragment, or are JSON
// the protocol's strict decoding refuses where the page's record puts
// them (protocol.ValidateAt at argsDepth), carries them as JSON text in
// Text across its fragments (as toolcall-delta does live), with
// ToolCallID and ToolName on every fragment; Args is then empty.
type Fragment struct {
	Block        int            `json:"block"`
	Fragment     int            `json:"fragment"`
	LastFragment bool           `json:"lastFragment"`
	Content      protocol.Block `json:"content"`
}

// Part is one page row: all or part of one shown entry, or a notice.
type Part struct {
	// Entry identifies the entry across snapshots: n.<native id> (hashed
	// to h-<40 hex> when it does not fit the id pattern) or x.<...> for a
	// notice, so no native id can collide with a notice.
	Entry string `json:"entry"`
	// Native is the Pi entry id, empty for notices.
	Native string `json:"native,omitempty"`
	Kind   string `json:"kind"`
	Role   string `json:"role,omitempty"`
	// Line is the entry's line in the session file (1 is the header).
	Line      int    `json:"line"`
	Timestamp string `json:"timestamp,omitempty"`
	Part      int    `json:"part"`
	LastPart  bool   `json:"lastPart"`

	StopReason string         `json:"stopReason,omitempty"`
	CustomType string         `json:"customType,omitempty"`
	Tool       *protocol.Tool `json:"tool,omitempty"`
	Notice     *Notice        `json:"notice,omitempty"`
	Blocks     []Fragment     `json:"blocks,omitempty"`
}

// parts cuts an item into parts: strings into fragments, fragments into
// parts of at most MaxPartBlocks and about maxPartBytes of JSON. Content
// is never clipped.
func parts(it item) []Part {
	v := it.v
	base := Part{Entry: it.key, Native: short(it.native), Kind: v.kind, Role: v.role, Line: it.line,
		Timestamp: v.timestamp, StopReason: v.stopReason, CustomType: v.customType, Tool: v.tool, Notice: v.notice}
	frags, sizes := v.fragments()
	return cutParts(base, frags, sizes)
}

// cutParts groups fragments into parts of at most MaxPartBlocks and about
// maxPartBytes of JSON, each a copy of base, numbered, the last marked.
func cutParts(base Part, frags []Fragment, sizes []int) []Part {
	var out []Part
	var open parter
	start := 0
	for i := range frags {
		if open.add(sizes[i]) {
			out = append(out, withBlocks(base, frags[start:i]))
			start = i
		}
	}
	out = append(out, withBlocks(base, frags[start:]))
	for i := range out {
		out[i].Part = i
	}
	out[len(out)-1].LastPart = true
	return out
}

// fragments cuts the view's blocks once.
func (v *view) fragments() ([]Fragment, []int) {
	v.cut.Do(func() { v.frags, v.sizes = cutBlocks(v.blocks) })
	return v.frags, v.sizes
}

// cutBlocks cuts each block into fragments and returns them with an upper
// bound of each one's JSON size.
func cutBlocks(blocks []protocol.Block) (frags []Fragment, sizes []int) {
	for i, b := range blocks {
		for f, size := range fragments(i, b) {
			frags = append(frags, f)
			sizes = append(sizes, size)
		}
	}
	return frags, sizes
}

// parter is the part cutParts is filling: its fragments and their bytes.
type parter struct{ n, bytes int }

// add takes the next fragment, of size bytes at most, and says whether
// it starts a new part: the open one holds MaxPartBlocks fragments, or
// would outgrow maxPartBytes with it (a fragment alone is never left out).
func (p *parter) add(size int) bool {
	next := p.n > 0 && (p.n == MaxPartBlocks || p.bytes+size > maxPartBytes)
	if next {
		p.n, p.bytes = 0, 0
	}
	p.n++
	p.bytes += size
	return next
}

func withBlocks(p Part, fs []Fragment) Part {
	if len(fs) > 0 {
		p.Blocks = fs
	}
	return p
}

// fragments cuts block b (ordinal i) into its fragments, each with an
// upper bound of its JSON size. A block that is one fragment (nearly
// every one) is cut without an allocation, so counting a message's parts
// costs no more than a pass over it.
func fragments(i int, b protocol.Block) iter.Seq2[Fragment, int] {
	return func(yield func(Fragment, int) bool) {
		ids := escLen(b.ToolCallID) + escLen(b.ToolName) + escLen(b.MimeType) + fragmentOverhead
		if b.Type == "toolCall" && len(b.Args) > 0 {
			if n, u := escLen(string(b.Args)), units(string(b.Args)); n <= maxFragmentBytes && u <= MaxStringChars && protocol.ValidateAt(b.Args, argsDepth) == nil {
				yield(Fragment{Block: i, LastFragment: true, Content: b}, n+escLen(b.Text)+ids)
				return
			}
			// Too large for one fragment, or JSON a client's strict
			// decoding of the page's record would refuse (an unsafe
			// integer, a lone surrogate, nesting past its bound...:
			// encoding/json read it, and copying a raw value checks none
			// of that): carry the JSON text instead.
			b.Text, b.Args = string(b.Args), nil
		}
		if len(b.Text) <= MaxStringChars {
			if n := escLen(b.Text); n <= maxFragmentBytes { // oneFragment, its escLen kept
				yield(Fragment{Block: i, LastFragment: true, Content: b}, n+ids)
				return
			}
		}
		pieces := cutString(b.Text)
		for k, s := range pieces {
			c := b
			c.Text = s
			if !yield(Fragment{Block: i, Fragment: k, LastFragment: k == len(pieces)-1, Content: c}, escLen(s)+ids) {
				return
			}
		}
	}
}

// oneFragment says s is one piece of cutString.
func oneFragment(s string) bool { return len(s) <= MaxStringChars && escLen(s) <= maxFragmentBytes }

// cutString splits s into pieces of at most MaxStringChars UTF-16 units
// and maxFragmentBytes of escaped JSON, on rune boundaries, so a surrogate
// pair or a UTF-8 sequence is never cut. It always returns one piece at
// least.
func cutString(s string) []string {
	if oneFragment(s) {
		return []string{s}
	}
	var out []string
	start, u, n := 0, 0, 0
	for i := 0; i < len(s); {
		r, size := rune(s[i]), 1
		ru, rn := 1, 0
		if r < utf8.RuneSelf {
			rn = int(asciiEsc[r])
		} else {
			r, size = utf8.DecodeRuneInString(s[i:])
			ru, rn = runeUnits(r), runeEsc(r, size)
		}
		if u+ru > MaxStringChars || n+rn > maxFragmentBytes {
			out = append(out, s[start:i])
			start, u, n = i, 0, 0
		}
		u += ru
		n += rn
		i += size
	}
	return append(out, s[start:])
}

// units counts UTF-16 code units, the unit JavaScript clients count
// characters in; it is never less than the number of runes.
func units(s string) int {
	n := 0
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf {
			n++
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		n += runeUnits(r)
		i += size
	}
	return n
}

func runeUnits(r rune) int {
	if r >= 0x10000 {
		return 2
	}
	return 1
}

// escLen is the length of s as encoding/json writes it inside quotes
// (HTML characters and U+2028/U+2029 escaped, invalid bytes as \ufffd).
func escLen(s string) int {
	n := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			n += int(asciiEsc[c])
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		n += runeEsc(r, size)
		i += size
	}
	return n
}

// asciiEsc is runeEsc for the ASCII range.
var asciiEsc = func() (t [utf8.RuneSelf]uint8) {
	for c := range t {
		t[c] = uint8(runeEsc(rune(c), 1))
	}
	return t
}()

func runeEsc(r rune, size int) int {
	switch {
	case r == utf8.RuneError && size == 1:
		return 6
	case r == '"' || r == '\\':
		return 2
	case r == '\b' || r == '\f' || r == '\n' || r == '\r' || r == '\t':
		return 2
	case r < 0x20, r == '<', r == '>', r == '&', r == 0x2028, r == 0x2029:
		return 6
	}
	return size
}
