package terminal

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/mosaic-agents/mosaic/protocol"
)

// MaxToolLines bounds the partial result shown under a running tool: the
// last MaxToolLines lines, after a line saying how many were left out.
const MaxToolLines = 20

// Lines renders the transcript to lines of at most width cells (width <= 0:
// no wrapping), every piece of engine text sanitized: LF in a message body
// is a line break; headers, notices and markers stay one line each.
func (t *Transcript) Lines(width int) []string {
	var out []string
	for _, it := range t.items {
		if t.shown(it) {
			out = append(out, it.lines(width)...)
		}
	}
	return out
}

// shown says whether an item has lines of its own: a tool whose result
// message arrived is shown by that message.
func (t *Transcript) shown(it *item) bool {
	return it.kind != itemTool || !t.results[it.tool.callID]
}

// count is len(t.Lines(width)) without building them: a frame needs the
// length and only the lines of its viewport, and the items' caches
// make both cheap.
func (t *Transcript) count(width int) int {
	n := 0
	for _, it := range t.items {
		if t.shown(it) {
			n += it.count(width)
		}
	}
	return n
}

// window appends to dst t.Lines(width)[from:from+n] (fewer at the end),
// laying out only the items it spans.
func (t *Transcript) window(dst []string, width, from, n int) []string {
	at := 0
	for _, it := range t.items {
		if n <= 0 {
			break
		}
		if !t.shown(it) {
			continue
		}
		if c := it.count(width); at+c <= from {
			at += c
			continue
		}
		all := it.lines(width)
		ls := all[from-at:] // from >= at: the items before it were skipped or taken whole
		ls = ls[:min(len(ls), n)]
		dst = append(dst, ls...)
		n -= len(ls)
		at += len(all)
		from = at
	}
	return dst
}

// version is the item's version, which any change to it bumps.
func (it *item) version() int {
	switch it.kind {
	case itemMessage:
		return it.msg.ver
	case itemTool:
		return it.tool.ver
	}
	return 0
}

// lines renders one item, from the cache when neither the width nor the
// item changed since the last call.
func (it *item) lines(width int) []string {
	ver := it.version()
	if it.cache != nil && it.cw == width && it.cv == ver {
		return it.cache
	}
	l := layout{width: width, keep: true, out: make([]string, 0, it.count(width))}
	it.layout(&l)
	it.cache, it.cw, it.cv = l.out, width, ver
	return l.out
}

// count is len(it.lines(width)), from either cache, or counted without
// building the lines.
func (it *item) count(width int) int {
	ver := it.version()
	if it.cache != nil && it.cw == width && it.cv == ver {
		return len(it.cache)
	}
	if it.counted && it.nw == width && it.nv == ver {
		return it.n
	}
	l := layout{width: width}
	it.layout(&l)
	it.n, it.nw, it.nv, it.counted = l.n, width, ver, true
	return l.n
}

func (it *item) layout(l *layout) {
	switch it.kind {
	case itemMessage:
		it.msg.layout(l)
	case itemTool:
		it.tool.layout(l)
	case itemNotice:
		l.line("-- " + it.text + " --")
	case itemMarker:
		l.line("== reconcile: " + it.text + " ==")
	}
}

// inner is the width left after an indent of n cells.
func inner(width, n int) int {
	if width <= 0 {
		return 0
	}
	return max(width-n, 1)
}

// body wraps s under prefix. The lines share one string: a first frame
// wraps every message of the transcript, and one allocation per message
// instead of one per line is most of what that frame costs.
func body(prefix, s string, width int) []string {
	in := inner(width, Width(prefix))
	var out []string
	if !strings.Contains(s, "\n") {
		out = wrapLine(s, in) // the common case: no copy of the lines' slice
	} else {
		for l := range strings.SplitSeq(s, "\n") {
			out = append(out, wrapLine(l, in)...)
		}
	}
	n := 0
	for _, w := range out {
		n += len(prefix) + len(w)
	}
	var b strings.Builder
	b.Grow(n)
	for _, w := range out {
		b.WriteString(prefix)
		b.WriteString(w)
	}
	all, at := b.String(), 0
	for i, w := range out {
		out[i] = all[at : at+len(prefix)+len(w)]
		at += len(prefix) + len(w)
	}
	return out
}

// plainStop are the stop reasons of a message that ended as turns do,
// Pi's and Claude's: the header names only the others (an error, a cut
// at the token limit, an abort).
var plainStop = map[string]bool{"stop": true, "toolUse": true, "end_turn": true, "tool_use": true, "stop_sequence": true}

// header is the message's first line: its role, and how it ended or
// that it has not yet.
func (m *message) header() string {
	head := "[" + m.role
	if m.role == "toolResult" {
		head = "[tool result"
		if m.tool != nil {
			if m.tool.Name != "" { // Claude's results name only the call
				head += " " + m.tool.Name
			}
			if m.tool.IsError {
				head += " (error)"
			}
		}
	}
	head += "]"
	switch {
	case !m.final || m.lastPart < 0:
		head += " …"
	case m.stopReason != "" && !plainStop[m.stopReason]:
		head += " (" + m.stopReason + ")"
	}
	if m.continued && !m.final {
		head += " (start not seen)"
	}
	return head
}

func (m *message) layout(l *layout) {
	if l.keep {
		l.line(m.header())
	} else {
		l.n++ // one line, whatever it says
	}
	if m.final {
		var few [4]int // most messages have one part: no allocation
		ps := few[:0]
		for p := range m.parts {
			ps = append(ps, p)
		}
		slices.Sort(ps)
		want := 0
		for _, p := range ps {
			switch {
			case p == want+1:
				l.line(fmt.Sprintf("  [part %d missing]", want))
			case p > want:
				l.line(fmt.Sprintf("  [parts %d-%d missing]", want, p-1))
			}
			want = max(want, p+1)
			for _, b := range m.parts[p] {
				finalBlock(l, b)
			}
		}
		return
	}
	bs := make([]int, 0, len(m.blocks))
	for b := range m.blocks {
		bs = append(bs, b)
	}
	slices.Sort(bs)
	for _, i := range bs {
		m.blocks[i].layout(l)
	}
}

// cutNote follows a block the live stream carried only the start of
// (protocol.Block.Truncated): the history holds it whole.
const cutNote = "  [cut short in the live stream; the history holds all of it: Ctrl-O re-reads]"

func finalBlock(l *layout, b protocol.Block) {
	finalBody(l, b)
	if b.Truncated {
		l.line(cutNote)
	}
}

func finalBody(l *layout, b protocol.Block) {
	switch b.Type {
	case "text":
		if b.Text != "" {
			l.body("  ", b.Text)
		}
	case "thinking":
		if b.Text != "" {
			l.body("  | ", b.Text)
		}
	case "toolCall":
		l.body("  → ", b.ToolName+" "+compact(b.Args))
	case "image":
		l.line("  [image " + b.MimeType + "]")
	default:
		l.line("  [unavailable block " + b.Type + "]")
	}
}

func (b *block) layout(l *layout) {
	s := b.text.String()
	if b.elided {
		s = "…" + s
	}
	switch b.typ {
	case "thinking":
		l.body("  | ", s)
	case "toolCall":
		if len(b.args) > 0 {
			s = compact(b.args)
		}
		l.body("  → ", b.name+" "+s)
	default:
		if s != "" {
			l.body("  ", s)
		}
	}
}

func (x *tool) layout(l *layout) {
	state := "running"
	switch {
	case x.done && x.isError:
		state = "failed"
	case x.done:
		state = "done"
	}
	l.line("[tool " + x.name + " " + state + "]")
	if len(x.args) > 0 {
		l.body("  → ", compact(x.args))
	}
	if r := resultText(x.result); r != "" {
		l.bodyTail("  ", r, MaxToolLines, func(left int) string { return fmt.Sprintf("  … %d earlier lines", left) })
	}
}

// compact shows JSON (tool arguments, a result without text content) on
// one line. The controller encodes every record without HTML escaping, so
// "2>&1" arrives as the model wrote it; an escape the model itself wrote
// stays visible as written.
func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

// resultText shows a tool result: the text of its content blocks when it
// has the engine's {content: [...]} shape, a JSON string's value, or the
// compact JSON otherwise.
func resultText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var r struct {
		Content []protocol.Block `json:"content"`
	}
	if json.Unmarshal(raw, &r) == nil && len(r.Content) > 0 {
		parts := make([]string, 0, len(r.Content))
		for _, b := range r.Content {
			if b.Type == "text" {
				parts = append(parts, b.Text)
			} else {
				parts = append(parts, "["+b.Type+"]")
			}
		}
		return strings.Join(parts, "\n")
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return compact(raw)
}
