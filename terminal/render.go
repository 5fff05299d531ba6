package terminal

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
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
// length and only the lines of its viewport, and the items' line caches
// make both cheap.
func (t *Transcript) count(width int) int {
	n := 0
	for _, it := range t.items {
		if t.shown(it) {
			n += len(it.lines(width))
		}
	}
	return n
}

// window appends to dst t.Lines(width)[from:from+n] (fewer at the end),
// touching only the items it spans.
func (t *Transcript) window(dst []string, width, from, n int) []string {
	at := 0
	for _, it := range t.items {
		if n <= 0 {
			break
		}
		if !t.shown(it) {
			continue
		}
		all := it.lines(width)
		if at+len(all) <= from {
			at += len(all)
			continue
		}
		ls := all[from-at:] // from >= at: the items before it were skipped or taken whole
		ls = ls[:min(len(ls), n)]
		dst = append(dst, ls...)
		n -= len(ls)
		at += len(all)
		from = at
	}
	return dst
}

// lines renders one item, from the cache when neither the width nor the
// item changed since the last call.
func (it *item) lines(width int) []string {
	ver := 0
	switch it.kind {
	case itemMessage:
		ver = it.msg.ver
	case itemTool:
		ver = it.tool.ver
	}
	if it.cache != nil && it.cw == width && it.cv == ver {
		return it.cache
	}
	var ls []string
	switch it.kind {
	case itemMessage:
		ls = it.msg.lines(width)
	case itemTool:
		ls = it.tool.lines(width)
	case itemNotice:
		ls = []string{clip("-- "+it.text+" --", width)}
	case itemMarker:
		ls = []string{clip("== reconcile: "+it.text+" ==", width)}
	}
	if ls == nil {
		ls = []string{}
	}
	it.cache, it.cw, it.cv = ls, width, ver
	return ls
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

func (m *message) lines(width int) []string {
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
	out := []string{clip(head, width)}
	if m.final && len(m.parts) == 1 && len(m.parts[0]) == 1 {
		// One block, the common case: its lines after the header in one
		// slice, without growing one.
		ls := finalBlock(m.parts[0][0], width)
		return append(append(make([]string, 0, 1+len(ls)), out[0]), ls...)
	}
	if m.final {
		ps := make([]int, 0, len(m.parts))
		for p := range m.parts {
			ps = append(ps, p)
		}
		sort.Ints(ps)
		want := 0
		for _, p := range ps {
			switch {
			case p == want+1:
				out = append(out, clip(fmt.Sprintf("  [part %d missing]", want), width))
			case p > want:
				out = append(out, clip(fmt.Sprintf("  [parts %d-%d missing]", want, p-1), width))
			}
			want = max(want, p+1)
			for _, b := range m.parts[p] {
				out = append(out, finalBlock(b, width)...)
			}
		}
		return out
	}
	bs := make([]int, 0, len(m.blocks))
	for b := range m.blocks {
		bs = append(bs, b)
	}
	sort.Ints(bs)
	for _, i := range bs {
		out = append(out, m.blocks[i].lines(width)...)
	}
	return out
}

// cutNote follows a block the live stream carried only the start of
// (protocol.Block.Truncated): the history holds it whole.
const cutNote = "  [cut short in the live stream; the history holds all of it: Ctrl-O re-reads]"

func finalBlock(b protocol.Block, width int) []string {
	out := finalBody(b, width)
	if b.Truncated {
		out = append(out, clip(cutNote, width))
	}
	return out
}

func finalBody(b protocol.Block, width int) []string {
	switch b.Type {
	case "text":
		if b.Text == "" {
			return nil
		}
		return body("  ", b.Text, width)
	case "thinking":
		if b.Text == "" {
			return nil
		}
		return body("  | ", b.Text, width)
	case "toolCall":
		return body("  → ", b.ToolName+" "+compact(b.Args), width)
	case "image":
		return []string{clip("  [image "+b.MimeType+"]", width)}
	}
	return []string{clip("  [unavailable block "+b.Type+"]", width)}
}

func (b *block) lines(width int) []string {
	s := b.text.String()
	if b.elided {
		s = "…" + s
	}
	switch b.typ {
	case "thinking":
		return body("  | ", s, width)
	case "toolCall":
		if len(b.args) > 0 {
			s = compact(b.args)
		}
		return body("  → ", b.name+" "+s, width)
	}
	if s == "" {
		return nil
	}
	return body("  ", s, width)
}

func (x *tool) lines(width int) []string {
	state := "running"
	switch {
	case x.done && x.isError:
		state = "failed"
	case x.done:
		state = "done"
	}
	out := []string{clip("[tool "+x.name+" "+state+"]", width)}
	if len(x.args) > 0 {
		out = append(out, body("  → ", compact(x.args), width)...)
	}
	if r := resultText(x.result); r != "" {
		ls := body("  ", r, width)
		if n := len(ls) - MaxToolLines; n > 0 {
			ls = append([]string{clip(fmt.Sprintf("  … %d earlier lines", n), width)}, ls[n:]...)
		}
		out = append(out, ls...)
	}
	return out
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
