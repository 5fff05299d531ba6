package client

import (
	"unicode/utf16"
	"unicode/utf8"

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

// lineDecoder decodes the stream of one connection. It keeps the last
// execution and message key so a run of deltas shares their strings, and
// takes each event from a block it shares with the events before it: a
// flood of deltas then costs an allocation per block instead of two per
// line.
type lineDecoder struct {
	execution, message string
	boxes              []eventBox
}

// event decodes an event line in one pass, validating it as it goes, when
// the line has the flat shape the controller writes for streaming events:
// no whitespace, every key one of protocol.Event's own names spelled
// exactly and at most once, string values, non-negative integers and
// booleans. Anything else (a nested value such as content or tool, null,
// a negative or non-integer number, an unknown or differently cased key,
// a surrogate escape) reports false and the line takes the full path:
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
	for {
		key, next, ok := plainKey(line, i)
		if !ok {
			return nil, false
		}
		i = next
		bit, kind := eventField(key)
		if bit == 0 || seen&bit != 0 {
			return nil, false
		}
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
			if !ok {
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

// boxBlock is how many events share one allocation: keeping one event
// keeps its block, about 2.3 KiB.
const boxBlock = 8

// box returns a zeroed event from the current block.
func (d *lineDecoder) box() *eventBox {
	if len(d.boxes) == 0 {
		d.boxes = make([]eventBox, boxBlock)
	}
	b := &d.boxes[0]
	d.boxes = d.boxes[1:]
	return b
}

// eventField names the seen bit and the value kind ('s'tring, 'n'umber,
// 'b'oolean) of a key of protocol.Event; 0 for any other key, including
// "record" a second time and the nested ones.
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

// str reads a string value at i. The strings every delta of a run repeats
// (names from a small vocabulary, the execution and message keys) are
// shared instead of allocated again.
func (d *lineDecoder) str(line []byte, i int, bit uint32) (string, int, bool) {
	raw, next, escaped, ok := stringSpan(line, i)
	if !ok {
		return "", 0, false
	}
	if escaped {
		s, ok := unescape(raw)
		return s, next, ok
	}
	switch bit {
	case fExecution:
		if string(raw) != d.execution {
			d.execution = string(raw)
		}
		return d.execution, next, true
	case fMessage:
		if string(raw) != d.message {
			d.message = string(raw)
		}
		return d.message, next, true
	case fKind, fRole, fBlockType, fUpdateMode:
		if s, ok := vocabulary(raw); ok {
			return s, next, true
		}
	}
	return string(raw), next, true
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
		// Skip the plain run first: most of a line is plain ASCII, and one
		// table load per byte is cheaper than the switch below.
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

// unescape decodes a string's escapes the way encoding/json does. A \u
// escape in the surrogate range is left to the full path, which pairs or
// refuses it.
func unescape(raw []byte) (string, bool) {
	out := make([]byte, 0, len(raw))
	for j := 0; j < len(raw); j++ {
		c := raw[j]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		j++
		if j >= len(raw) {
			return "", false
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
				return "", false
			}
			out = utf8.AppendRune(out, r)
			j += 4
		default:
			return "", false
		}
	}
	return string(out), true
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
