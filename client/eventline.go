package client

import (
	"bytes"
	"encoding/binary"
	"slices"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/mosaic-agents/mosaic/protocol"
)

// eventPrefix starts every event line the controller writes: protocol.Line
// encodes the Event struct in field order, "record" first.
const eventPrefix = `{"record":"event",`

// eventFields are the keys the one-pass decoder takes, as protocol.Event
// spells them; each has a bit in the seen mask.
const (
	fKind = 1 << iota
	fExecution
	fSeq
	fMessage
	fRole
	fBlock
	fBlockType
	fFragment
	fLastFragment
	fUpdateMode
	fPart
	fLastPart
	fText
	fTexts
	fContent
	fStopReason
	fReason
	fNative
	fTruncated
)

// eventBox holds an event and its ordinals in one allocation.
type eventBox struct {
	ev                    protocol.Event
	block, fragment, part int
}

// lineDecoder decodes the stream of one connection. It keeps the string
// values a run of deltas repeats (the execution and message keys, the
// kind, role, block type and update mode) so the run shares them, and
// takes each event and its strings from blocks it shares with the events
// before it: a flood of deltas then costs an allocation per block
// instead of two per line.
type lineDecoder struct {
	execution, message          repeat
	kind, role, blockType, mode repeat
	boxes                       []eventBox
	strs                        []byte   // the block strings are taken from (string)
	unescaped                   []byte   // an escaped string decoded, before it is copied
	run                         []string // a run's texts as they are read
}

// repeat is a string value a run of events repeats.
type repeat struct {
	s string
	// plain: s has no quote, backslash or control byte, so a line
	// spells s exactly as s.
	plain bool
}

// newRepeat is s as the repeat of a value just read.
func newRepeat(s string) repeat {
	plain := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' || c < 0x20 {
			plain = false
			break
		}
	}
	return repeat{s: s, plain: plain}
}

// event decodes an event line in one pass, validating it as it goes, when
// the line has the flat shape the controller writes for streaming events:
// no whitespace, every key one of protocol.Event's own names spelled
// exactly and at most once, string values, non-negative integers and
// booleans, content whose blocks are objects of the same kind (a
// message-end's text), and a run's texts. Anything else (a tool, a block's args, null, a
// negative or non-integer number, an unknown or differently cased key, a
// surrogate escape) reports false and the line takes the full path:
// protocol.Validate, then encoding/json. The one-pass decoder checks every
// rule Validate does (UTF-8, duplicate keys, control characters, escapes,
// the safe integer range) and produces exactly what encoding/json would
// (TestEventLineMatchesFullDecode, FuzzEventLine), so it can be slower
// than the full path, never different.
func (d *lineDecoder) event(line []byte) (*protocol.Event, bool) {
	if len(line) < len(eventPrefix) || string(line[:len(eventPrefix)]) != eventPrefix {
		return nil, false
	}
	box := d.box()
	ev := &box.ev
	ev.Record = protocol.RecordEvent
	var seen uint32
	i := len(eventPrefix)
	k := 0 // the next of eventKeys the line may hold, in wire order
	for {
		bit, kind, next, ok := nextKey(line, i, eventKeys[:], &k, eventField)
		if !ok || seen&bit != 0 {
			return nil, false
		}
		i = next
		seen |= bit
		switch kind {
		case 's':
			s, next, ok := d.str(line, i, bit)
			if !ok {
				return nil, false
			}
			i = next
			setString(ev, bit, s)
		case 'n':
			n, next, ok := uint53(line, i)
			if !ok || bit != fSeq && uint64(int(n)) != n {
				// An ordinal past int's range (a 32-bit build): the full
				// path refuses it.
				return nil, false
			}
			i = next
			switch bit {
			case fSeq:
				ev.Seq = n
			case fBlock:
				box.block = int(n)
				ev.Block = &box.block
			case fFragment:
				box.fragment = int(n)
				ev.Fragment = &box.fragment
			case fPart:
				box.part = int(n)
				ev.Part = &box.part
			}
		case 'b':
			v, next, ok := boolean(line, i)
			if !ok {
				return nil, false
			}
			i = next
			switch bit {
			case fLastFragment:
				ev.LastFragment = v
			case fLastPart:
				ev.LastPart = v
			case fTruncated:
				ev.Truncated = v
			}
		case 'c':
			blocks, next, ok := d.content(line, i)
			if !ok {
				return nil, false
			}
			i = next
			ev.Content = blocks
		case 't':
			texts, next, ok := d.texts(line, i)
			if !ok {
				return nil, false
			}
			i = next
			ev.Texts = texts
		}
		if i >= len(line) {
			return nil, false
		}
		switch line[i] {
		case ',':
			i++
		case '}':
			if i+1 != len(line) {
				return nil, false
			}
			return ev, true
		default:
			return nil, false
		}
	}
}

// boxBlock is how many events share one allocation: 53 fill a 16 KiB
// size class. Keeping one event keeps its block.
const boxBlock = 53

// box returns a zeroed event from the current block.
func (d *lineDecoder) box() *eventBox {
	if len(d.boxes) == 0 {
		d.boxes = make([]eventBox, boxBlock)
	}
	b := &d.boxes[0]
	d.boxes = d.boxes[1:]
	return b
}

// strBlock is the size of the blocks short strings are copied into, and
// strShort the longest string that shares one: a longer string is
// allocated on its own, so keeping a short string (a Transcript keeps
// every event's text) keeps at most strBlock bytes.
const (
	strBlock = 8 << 10
	strShort = 1 << 10
)

// string returns raw as a string. A short one is copied into the
// decoder's current block and the string points there: the block is
// never written again where a string was handed out (only appended to
// past it, and replaced when full) and never handed out as bytes, so the
// string is as immutable as one Go allocated, at one allocation per block
// instead of one per string.
func (d *lineDecoder) string(raw []byte) string {
	if len(raw) == 0 || len(raw) > strShort {
		return string(raw)
	}
	if cap(d.strs)-len(d.strs) < len(raw) {
		d.strs = make([]byte, 0, strBlock)
	}
	start := len(d.strs)
	d.strs = append(d.strs, raw...)
	return unsafe.String(&d.strs[start], len(raw))
}

// wireKey is a key the one-pass decoder takes, quoted and with its
// colon, with its seen bit and value kind ('s'tring, 'n'umber,
// 'b'oolean, 'c'ontent, 't'exts), and the key's first and last eight bytes as
// words (the first masked to the key when it is shorter) for hasKey.
type wireKey struct {
	key        string
	bit        uint32
	kind       byte
	head, tail uint64
	mask       uint64
}

func wk(key string, bit uint32, kind byte) wireKey {
	var b [16]byte
	copy(b[:], key)
	k := wireKey{key: key, bit: bit, kind: kind, head: binary.LittleEndian.Uint64(b[:]), mask: ^uint64(0)}
	if len(key) < 8 {
		k.mask = 1<<(8*len(key)) - 1
	} else {
		k.tail = binary.LittleEndian.Uint64([]byte(key[len(key)-8:]))
	}
	return k
}

// eventKeys are the keys eventField takes, in the order protocol.Line
// writes them (protocol.Event's field order). A line the controller wrote
// holds a subsequence of them, so the decoder looks for the next key among
// those after the last one it matched, a comparison or two instead of a
// scan of the key and a lookup; any other order is read by plainKey and
// eventField. Both take exactly the same keys (TestWireKeysMatchLookup).
var eventKeys = [...]wireKey{
	wk(`"kind":`, fKind, 's'),
	wk(`"execution":`, fExecution, 's'),
	wk(`"seq":`, fSeq, 'n'),
	wk(`"message":`, fMessage, 's'),
	wk(`"role":`, fRole, 's'),
	wk(`"block":`, fBlock, 'n'),
	wk(`"blockType":`, fBlockType, 's'),
	wk(`"fragment":`, fFragment, 'n'),
	wk(`"lastFragment":`, fLastFragment, 'b'),
	wk(`"updateMode":`, fUpdateMode, 's'),
	wk(`"part":`, fPart, 'n'),
	wk(`"lastPart":`, fLastPart, 'b'),
	wk(`"text":`, fText, 's'),
	wk(`"texts":`, fTexts, 't'),
	wk(`"content":`, fContent, 'c'),
	wk(`"stopReason":`, fStopReason, 's'),
	wk(`"reason":`, fReason, 's'),
	wk(`"native":`, fNative, 's'),
	wk(`"truncated":`, fTruncated, 'b'),
}

// nextKey reads the key at i: the next of keys from *k on, in wire order,
// when the line holds one of them there, else any key by plainKey and
// lookup. It reports false for a key lookup does not take (bit 0).
func nextKey(line []byte, i int, keys []wireKey, k *int, lookup func([]byte) (uint32, byte)) (bit uint32, kind byte, next int, ok bool) {
	for j := *k; j < len(keys); j++ {
		if f := &keys[j]; hasKey(line, i, f) {
			*k = j + 1
			return f.bit, f.kind, i + len(f.key), true
		}
	}
	key, next, ok := plainKey(line, i)
	if !ok {
		return 0, 0, 0, false
	}
	bit, kind = lookup(key)
	return bit, kind, next, bit != 0
}

// hasKey says whether line holds f's key at i: where sixteen bytes are
// left, by a word or two (every key is at most sixteen bytes), else byte
// by byte.
func hasKey(line []byte, i int, f *wireKey) bool {
	if len(line)-i < 16 {
		return len(line)-i >= len(f.key) && string(line[i:i+len(f.key)]) == f.key
	}
	if binary.LittleEndian.Uint64(line[i:])&f.mask != f.head {
		return false
	}
	return len(f.key) <= 8 || binary.LittleEndian.Uint64(line[i+len(f.key)-8:]) == f.tail
}

// eventField names the seen bit and the value kind of a key of
// protocol.Event; 0 for any other key, including "record" a second time
// and the tool.
func eventField(key []byte) (uint32, byte) {
	switch string(key) {
	case "kind":
		return fKind, 's'
	case "execution":
		return fExecution, 's'
	case "seq":
		return fSeq, 'n'
	case "message":
		return fMessage, 's'
	case "role":
		return fRole, 's'
	case "block":
		return fBlock, 'n'
	case "blockType":
		return fBlockType, 's'
	case "fragment":
		return fFragment, 'n'
	case "lastFragment":
		return fLastFragment, 'b'
	case "updateMode":
		return fUpdateMode, 's'
	case "part":
		return fPart, 'n'
	case "lastPart":
		return fLastPart, 'b'
	case "text":
		return fText, 's'
	case "texts":
		return fTexts, 't'
	case "content":
		return fContent, 'c'
	case "stopReason":
		return fStopReason, 's'
	case "reason":
		return fReason, 's'
	case "native":
		return fNative, 's'
	case "truncated":
		return fTruncated, 'b'
	}
	return 0, 0
}

func setString(ev *protocol.Event, bit uint32, s string) {
	switch bit {
	case fKind:
		ev.Kind = protocol.EventKind(s)
	case fExecution:
		ev.Execution = s
	case fMessage:
		ev.Message = s
	case fRole:
		ev.Role = s
	case fBlockType:
		ev.BlockType = s
	case fUpdateMode:
		ev.UpdateMode = protocol.UpdateMode(s)
	case fText:
		ev.Text = s
	case fStopReason:
		ev.StopReason = s
	case fReason:
		ev.Reason = s
	case fNative:
		ev.Native = s
	}
}

// Block keys, each with a bit in a block's seen mask.
const (
	bType = 1 << iota
	bText
	bToolCallID
	bToolName
	bMimeType
	bTruncated
)

// blockKeys are the keys blockField takes, in protocol.Block's field
// order. A block's args, raw JSON, takes the full path.
var blockKeys = [...]wireKey{
	wk(`"type":`, bType, 's'),
	wk(`"text":`, bText, 's'),
	wk(`"toolCallId":`, bToolCallID, 's'),
	wk(`"toolName":`, bToolName, 's'),
	wk(`"mimeType":`, bMimeType, 's'),
	wk(`"truncated":`, bTruncated, 'b'),
}

func blockField(key []byte) (uint32, byte) {
	switch string(key) {
	case "type":
		return bType, 's'
	case "text":
		return bText, 's'
	case "toolCallId":
		return bToolCallID, 's'
	case "toolName":
		return bToolName, 's'
	case "mimeType":
		return bMimeType, 's'
	case "truncated":
		return bTruncated, 'b'
	}
	return 0, 0
}

// content reads a message's content at i: an array of blocks, each an
// object of blockKeys' keys at most once, with string values and a
// boolean truncated. An empty array is an empty slice, not nil, as
// encoding/json makes it.
func (d *lineDecoder) content(line []byte, i int) ([]protocol.Block, int, bool) {
	if i+1 >= len(line) || line[i] != '[' {
		return nil, 0, false
	}
	i++
	blocks := []protocol.Block{}
	if line[i] == ']' {
		return blocks, i + 1, true
	}
	for {
		var b protocol.Block
		next, ok := d.block(line, i, &b)
		if !ok || next >= len(line) {
			return nil, 0, false
		}
		blocks = append(blocks, b)
		i = next
		switch line[i] {
		case ',':
			i++
		case ']':
			return blocks, i + 1, true
		default:
			return nil, 0, false
		}
	}
}

// texts reads a run's texts at i: an array of strings. An empty array
// is an empty slice, not nil, as encoding/json makes it.
func (d *lineDecoder) texts(line []byte, i int) ([]string, int, bool) {
	if i+1 >= len(line) || line[i] != '[' {
		return nil, 0, false
	}
	i++
	if line[i] == ']' {
		return []string{}, i + 1, true
	}
	// The texts are gathered in a slice the decoder keeps and then
	// copied into one of their exact length: a run's length is known
	// only at its end, and growing the slice handed out would allocate
	// a dozen times for a long run.
	defer func() {
		clear(d.run)
		d.run = d.run[:0]
	}()
	for {
		s, next, ok := d.value(line, i, false, nil)
		if !ok || next >= len(line) {
			return nil, 0, false
		}
		d.run = append(d.run, s)
		i = next
		switch line[i] {
		case ',':
			i++
		case ']':
			return slices.Clone(d.run), i + 1, true
		default:
			return nil, 0, false
		}
	}
}

// block reads one content block at i into b.
func (d *lineDecoder) block(line []byte, i int, b *protocol.Block) (int, bool) {
	if i+1 >= len(line) || line[i] != '{' {
		return 0, false
	}
	i++
	if line[i] == '}' {
		return i + 1, true
	}
	var seen uint32
	k := 0
	for {
		bit, kind, next, ok := nextKey(line, i, blockKeys[:], &k, blockField)
		if !ok || seen&bit != 0 {
			return 0, false
		}
		i = next
		seen |= bit
		switch kind {
		case 's':
			s, next, ok := d.value(line, i, bit == bType, nil)
			if !ok {
				return 0, false
			}
			i = next
			switch bit {
			case bType:
				b.Type = s
			case bText:
				b.Text = s
			case bToolCallID:
				b.ToolCallID = s
			case bToolName:
				b.ToolName = s
			case bMimeType:
				b.MimeType = s
			}
		case 'b':
			v, next, ok := boolean(line, i)
			if !ok {
				return 0, false
			}
			i = next
			b.Truncated = v
		}
		var closed bool
		if i, closed, ok = memberEnd(line, i); !ok || closed {
			return i, ok
		}
	}
}

// plainKey reads `"key":` at i: a key without escapes (an escaped key may
// spell a known one differently, so it goes to the full path).
func plainKey(line []byte, i int) (key []byte, next int, ok bool) {
	if i >= len(line) || line[i] != '"' {
		return nil, 0, false
	}
	j := i + 1
	for j < len(line) && !special[line[j]] {
		j++
	}
	if j+1 >= len(line) || line[j] != '"' || line[j+1] != ':' {
		return nil, 0, false
	}
	return line[i+1 : j], j + 2, true
}

// str reads a string value of an event at i. The strings every delta of
// a run repeats (names from a small vocabulary, the execution and message
// keys) are shared instead of copied again.
func (d *lineDecoder) str(line []byte, i int, bit uint32) (string, int, bool) {
	switch bit {
	case fExecution:
		return d.value(line, i, false, &d.execution)
	case fMessage:
		return d.value(line, i, false, &d.message)
	case fKind:
		return d.value(line, i, true, &d.kind)
	case fRole:
		return d.value(line, i, true, &d.role)
	case fBlockType:
		return d.value(line, i, true, &d.blockType)
	case fUpdateMode:
		return d.value(line, i, true, &d.mode)
	}
	return d.value(line, i, false, nil)
}

// value reads the string at i: last's when last is set and the line
// spells it there, else one of the vocabulary's names when vocab is set
// and it spells one, else a string of its own. last then becomes what
// was read (a name only when vocab is set).
func (d *lineDecoder) value(line []byte, i int, vocab bool, last *repeat) (string, int, bool) {
	if last != nil && last.plain {
		// A plain repeat is its own wire form: the line holds it, quoted,
		// exactly when it holds this string, valid as it was when first
		// read, with no need to scan it again.
		if n := len(last.s); i+n+1 < len(line) && line[i] == '"' && line[i+n+1] == '"' && string(line[i+1:i+n+1]) == last.s {
			return last.s, i + n + 2, true
		}
	}
	raw, next, escaped, ok := stringSpan(line, i)
	if !ok {
		return "", 0, false
	}
	var s string
	switch {
	case escaped:
		if d.unescaped, ok = unescape(d.unescaped[:0], raw); !ok {
			return "", 0, false
		}
		s = d.string(d.unescaped)
		if cap(d.unescaped) > strBlock {
			d.unescaped = nil // a long text's buffer is not kept for the next
		}
	case vocab:
		if s, ok = vocabulary(raw); ok {
			if last != nil {
				*last = repeat{s: s, plain: true}
			}
			return s, next, true
		}
		s = d.string(raw)
	default:
		s = d.string(raw)
	}
	if last != nil && !vocab {
		*last = newRepeat(s)
	}
	return s, next, true
}

// vocabulary returns the constant spelled by raw, when it is one of the
// names events repeat.
func vocabulary(raw []byte) (string, bool) {
	switch string(raw) {
	case string(protocol.EventTextDelta):
		return string(protocol.EventTextDelta), true
	case string(protocol.EventThinkingDelta):
		return string(protocol.EventThinkingDelta), true
	case string(protocol.EventToolCallDelta):
		return string(protocol.EventToolCallDelta), true
	case string(protocol.EventMessageStart):
		return string(protocol.EventMessageStart), true
	case string(protocol.EventRunSettled):
		return string(protocol.EventRunSettled), true
	case string(protocol.UpdateAppend):
		return string(protocol.UpdateAppend), true
	case string(protocol.UpdateReplace):
		return string(protocol.UpdateReplace), true
	case "assistant":
		return "assistant", true
	case "user":
		return "user", true
	case "text":
		return "text", true
	case "thinking":
		return "thinking", true
	case "toolCall":
		return "toolCall", true
	}
	return "", false
}

// stringSpan finds the string at i and checks it as Validate does: valid
// UTF-8, no control character, only JSON's escapes. It returns the raw
// contents and whether they hold an escape.
func stringSpan(line []byte, i int) (raw []byte, next int, escaped, ok bool) {
	if i >= len(line) || line[i] != '"' {
		return nil, 0, false, false
	}
	ascii := true
	for j := i + 1; j < len(line); j++ {
		// Skip the plain run first, most of a line: eight bytes at a time
		// while none of them is special, then one table load per byte,
		// both cheaper than the switch below.
		for j+8 <= len(line) && specialIn(binary.LittleEndian.Uint64(line[j:])) == 0 {
			j += 8
		}
		for j < len(line) && !special[line[j]] {
			j++
		}
		if j >= len(line) {
			break
		}
		c := line[j]
		switch {
		case c == '"':
			raw = line[i+1 : j]
			if !ascii && !utf8.Valid(raw) {
				return nil, 0, false, false
			}
			return raw, j + 1, escaped, true
		case c < 0x20:
			return nil, 0, false, false
		case c == '\\':
			escaped = true
			j++ // the escaped byte; unescape judges it
			if j >= len(line) {
				return nil, 0, false, false
			}
		default: // c >= utf8.RuneSelf
			ascii = false
		}
	}
	return nil, 0, false, false
}

// special marks the bytes a string scan must stop at: the quote, the
// backslash, control characters and the bytes of multi-byte UTF-8.
var special = func() (t [256]bool) {
	for c := range 256 {
		t[c] = c == '"' || c == '\\' || c < 0x20 || c >= utf8.RuneSelf
	}
	return t
}()

// specialIn is zero when no byte of w is one special marks: a '"' or a
// backslash (a zero byte in w xor that byte, found by the borrow it takes
// from the byte's high bit), a control character (one that borrows below
// 0x20) or a byte of multi-byte UTF-8 (its own high bit). The scan then
// finds which byte it is.
func specialIn(w uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	quote := w ^ (ones * '"')
	backslash := w ^ (ones * '\\')
	return (((quote - ones) &^ quote) | ((backslash - ones) &^ backslash) | ((w - ones*0x20) &^ w) | w) & highs
}

// unescape appends raw to out with its escapes decoded the way
// encoding/json decodes them. A \u escape in the surrogate range is left
// to the full path, which pairs or refuses it.
func unescape(out, raw []byte) ([]byte, bool) {
	for j := 0; j < len(raw); j++ {
		if k := bytes.IndexByte(raw[j:], '\\'); k != 0 {
			if k < 0 {
				k = len(raw) - j
			}
			out = append(out, raw[j:j+k]...) // the run up to the escape
			j += k - 1
			continue
		}
		j++
		if j >= len(raw) {
			return nil, false
		}
		switch raw[j] {
		case '"', '\\', '/':
			out = append(out, raw[j])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(raw[j+1:])
			if !ok || utf16.IsSurrogate(r) {
				return nil, false
			}
			out = utf8.AppendRune(out, r)
			j += 4
		default:
			return nil, false
		}
	}
	return out, true
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// uint53 reads a non-negative integer at i within Validate's safe range
// (at most 2^53-1), without a leading zero, fraction or exponent.
func uint53(line []byte, i int) (uint64, int, bool) {
	const maxSafe = 1<<53 - 1
	j := i
	var n uint64
	for j < len(line) && line[j] >= '0' && line[j] <= '9' {
		if j-i >= 16 {
			return 0, 0, false
		}
		n = n*10 + uint64(line[j]-'0')
		j++
	}
	switch {
	case j == i, n > maxSafe, line[i] == '0' && j-i > 1:
		return 0, 0, false
	case j < len(line) && (line[j] == '.' || line[j] == 'e' || line[j] == 'E'):
		return 0, 0, false
	}
	return n, j, true
}

func boolean(line []byte, i int) (bool, int, bool) {
	rest := line[i:]
	switch {
	case len(rest) >= 4 && string(rest[:4]) == "true":
		return true, i + 4, true
	case len(rest) >= 5 && string(rest[:5]) == "false":
		return false, i + 5, true
	}
	return false, 0, false
}
