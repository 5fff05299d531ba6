package terminal

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/mosaic-agents/mosaic/protocol"
)

// DedupWindow is how many of the latest events of the current execution
// the Transcript at least remembers (by digest; at most twice as many) to
// tell an identical repeat, which it drops, from a repeat with different
// bytes, which marks a reconcile. A repeat it no longer remembers cannot
// be compared and marks a reconcile.
const DedupWindow = 4096

// MaxToolLines bounds the partial result shown under a running tool: the
// last MaxToolLines lines, after a line saying how many were left out.
const MaxToolLines = 20

// HistoryMessage is one finished message of a history page, in the form
// the client library hands it over (the page format is the controller's;
// the library converts each entry).
type HistoryMessage struct {
	Role       string
	Content    []protocol.Block
	StopReason string
	// Tool is set on a toolResult message: its call id (which hides the
	// call's progress item), tool name and error flag.
	Tool *protocol.Tool
}

// Transcript is the view model of one conversation: history messages,
// then live protocol events applied as the contract says, with reconcile
// markers where the stream cannot be trusted to continue. It has no I/O:
// the client library and the terminal build the same Transcript from the
// same records and so render the same lines (E7).
//
// The zero value is ready to use. A Transcript is not safe for concurrent
// use.
type Transcript struct {
	items   []*item
	exec    string
	next    uint64 // next expected seq; 0 = nothing expected yet
	digests map[uint64][sha256.Size]byte
	seg     int                 // bumped at every reconcile marker
	msgs    map[string]*message // by seg/message key
	tools   map[string]*tool    // by seg/call id
	results map[string]bool     // call ids whose result message is present
	marked  bool
	// head counts the items above the first entry that starts on the
	// newest history page (Compose): the marker and the older history.
	head int
}

type itemKind int

const (
	itemMessage itemKind = iota
	itemTool
	itemNotice
	itemMarker
)

type item struct {
	kind itemKind
	msg  *message
	tool *tool
	text string
	// The lines last rendered, for width cw at version cv of the message
	// or tool: a frame re-renders only what changed since the last one.
	cache  []string
	cw, cv int
}

type message struct {
	role       string
	blocks     map[int]*block // provisional content, by block ordinal
	parts      map[int][]protocol.Block
	lastPart   int  // -1 until the last part is seen
	final      bool // a message-end arrived: parts replace blocks
	continued  bool // created by a delta: its start was not seen
	stopReason string
	tool       *protocol.Tool
	ver        int // bumped by every change, for the line cache
}

type block struct {
	typ    string
	text   strings.Builder
	next   int  // next expected fragment
	elided bool // the first fragment seen was not 0
	name   string
	args   json.RawMessage
}

type tool struct {
	callID, name string
	args         json.RawMessage
	result       json.RawMessage
	done         bool
	isError      bool
	ver          int // bumped by every change, for the line cache
}

func (t *Transcript) init() {
	if t.digests == nil {
		t.digests = make(map[uint64][sha256.Size]byte)
		t.msgs = make(map[string]*message)
		t.tools = make(map[string]*tool)
		t.results = make(map[string]bool)
	}
}

// Reset empties the transcript, before a page is re-read.
func (t *Transcript) Reset() { *t = Transcript{} }

// Marked reports whether a reconcile marker was shown since the last
// Reset: the library re-reads the page when it is.
func (t *Transcript) Marked() bool { return t.marked }

// Expect says where the live stream continues: the next event should be
// seq next of execution exec (from the observe reply's seam or a replay
// start). Without it, the first event must be seq 1 of its execution.
func (t *Transcript) Expect(exec string, next uint64) {
	t.init()
	t.exec, t.next = exec, next
	clear(t.digests)
}

// Mark shows a reconcile marker (a seam that is not quiet, a re-read in
// progress): content after it is never joined to content before it.
func (t *Transcript) Mark(reason string) {
	t.init()
	t.reconcile(reason)
}

func (t *Transcript) reconcile(reason string) {
	t.items = append(t.items, &item{kind: itemMarker, text: reason})
	t.seg++
	t.marked = true
}

func (t *Transcript) notice(text string) {
	t.items = append(t.items, &item{kind: itemNotice, text: text})
}

// AddHistory appends a finished message from a history page.
func (t *Transcript) AddHistory(h HistoryMessage) {
	t.init()
	m := &message{role: h.Role, parts: map[int][]protocol.Block{0: h.Content}, lastPart: 0, final: true, stopReason: h.StopReason, tool: h.Tool}
	if h.Tool != nil && h.Role == "toolResult" {
		t.results[h.Tool.CallID] = true
	}
	t.items = append(t.items, &item{kind: itemMessage, msg: m})
}

// Apply applies one live event. An identical repeat of an event already
// applied (same execution and seq, same bytes) is dropped; a repeat with
// other bytes, a sequence gap and a new execution each show a reconcile
// marker first, and what follows the marker is never joined to what came
// before it.
func (t *Transcript) Apply(e protocol.Event) {
	t.init()
	d := digest(e)
	switch {
	case t.exec == "" && t.next == 0:
		t.exec = e.Execution
		if e.Seq != 1 {
			t.reconcile(fmt.Sprintf("joined execution %s at seq %d", e.Execution, e.Seq))
		}
	case e.Execution != t.exec:
		t.reconcile("new execution " + e.Execution)
		t.exec = e.Execution
		clear(t.digests)
	case e.Seq < t.next:
		old, ok := t.digests[e.Seq]
		switch {
		case ok && old == d:
			return
		case ok:
			t.reconcile(fmt.Sprintf("event %d repeated with different content", e.Seq))
		default:
			t.reconcile(fmt.Sprintf("event %d repeated outside the dedup window", e.Seq))
		}
		return
	case e.Seq > t.next:
		t.reconcile(fmt.Sprintf("sequence gap: expected %d, got %d", t.next, e.Seq))
	}
	t.next = e.Seq + 1
	t.digests[e.Seq] = d
	if len(t.digests) > 2*DedupWindow {
		for seq := range t.digests {
			if seq+DedupWindow <= e.Seq {
				delete(t.digests, seq)
			}
		}
	}
	t.apply(e)
}

func (t *Transcript) key(s string) string { return strconv.Itoa(t.seg) + "/" + s }

func (t *Transcript) newMessage(key, role string, continued bool) *message {
	m := &message{role: role, blocks: make(map[int]*block), parts: make(map[int][]protocol.Block), lastPart: -1, continued: continued}
	t.msgs[t.key(key)] = m
	t.items = append(t.items, &item{kind: itemMessage, msg: m})
	return m
}

// message returns the addressed message of the current segment, creating
// it (its start unseen) when a seam put it out of reach.
func (t *Transcript) message(e protocol.Event) *message {
	if m := t.msgs[t.key(e.Message)]; m != nil {
		return m
	}
	return t.newMessage(e.Message, e.Role, true)
}

func (t *Transcript) tool(e protocol.Event) *tool {
	k := t.key(e.Tool.CallID)
	if x := t.tools[k]; x != nil {
		return x
	}
	x := &tool{callID: e.Tool.CallID, name: e.Tool.Name}
	t.tools[k] = x
	t.items = append(t.items, &item{kind: itemTool, tool: x})
	return x
}

func (t *Transcript) apply(e protocol.Event) {
	switch e.Kind {
	case protocol.EventMessageStart:
		if t.msgs[t.key(e.Message)] != nil {
			t.reconcile(fmt.Sprintf("message %s started twice", e.Message))
		}
		t.newMessage(e.Message, e.Role, false)
	case protocol.EventTextDelta, protocol.EventThinkingDelta, protocol.EventToolCallDelta:
		t.delta(e)
	case protocol.EventMessageEnd:
		m := t.msgs[t.key(e.Message)]
		if m == nil {
			m = t.newMessage(e.Message, e.Role, false)
		}
		if e.Role != "" {
			m.role = e.Role
		}
		p := 0
		if e.Part != nil {
			p = *e.Part
		}
		m.parts[p] = e.Content
		if e.LastPart || e.Part == nil {
			m.lastPart = p
		}
		m.final = true
		m.stopReason = e.StopReason
		m.ver++
		if e.Tool != nil && m.role == "toolResult" {
			m.tool = e.Tool
			t.results[e.Tool.CallID] = true
		}
	case protocol.EventToolStart, protocol.EventToolUpdate, protocol.EventToolEnd:
		if e.Tool == nil {
			t.notice("unavailable: " + string(e.Kind) + " without a tool call")
			return
		}
		x := t.tool(e)
		x.ver++
		if e.Tool.Name != "" {
			x.name = e.Tool.Name
		}
		switch e.Kind {
		case protocol.EventToolStart:
			x.args = e.Tool.Args
		case protocol.EventToolUpdate:
			x.result = e.Tool.Result
		case protocol.EventToolEnd:
			x.result, x.done, x.isError = e.Tool.Result, true, e.Tool.IsError
		}
	case protocol.EventRunSettled:
		t.notice("run settled")
	case protocol.EventUnavailable:
		s := "unavailable: " + e.Reason
		if e.Native != "" {
			s += " (" + e.Native + ")"
		}
		t.notice(s)
	default:
		// A kind this client does not know: show a gap, never guess.
		t.notice("unavailable: unknown event kind " + string(e.Kind))
	}
}

// blockTypes is the block type each delta kind addresses (the kind, not
// the optional BlockType field, decides how a block is shown).
var blockTypes = map[protocol.EventKind]string{
	protocol.EventTextDelta:     "text",
	protocol.EventThinkingDelta: "thinking",
	protocol.EventToolCallDelta: "toolCall",
}

// delta appends a text, thinking or tool-call argument fragment to its
// block. A fragment out of order, or a delta for a message already ended,
// marks a reconcile and goes to a fresh copy of the message after it.
func (t *Transcript) delta(e protocol.Event) {
	b := 0
	if e.Block != nil {
		b = *e.Block
	}
	m := t.message(e)
	blk := m.blocks[b]
	frag := -1
	if e.Fragment != nil {
		frag = *e.Fragment
	}
	switch {
	case m.final:
		t.reconcile(fmt.Sprintf("delta after the end of message %s", e.Message))
		m, blk = t.message(e), nil
	case blk != nil && frag >= 0 && frag != blk.next:
		t.reconcile(fmt.Sprintf("fragment gap in message %s block %d: expected %d, got %d", e.Message, b, blk.next, frag))
		m, blk = t.message(e), nil
	}
	if blk == nil {
		blk = &block{typ: blockTypes[e.Kind], next: max(frag, 0), elided: frag > 0}
		m.blocks[b] = blk
	}
	m.ver++
	blk.text.WriteString(e.Text)
	if frag >= 0 {
		blk.next = frag + 1
	} else {
		blk.next++
	}
	if e.Tool != nil {
		if e.Tool.Name != "" {
			blk.name = e.Tool.Name
		}
		if e.LastFragment && len(e.Tool.Args) > 0 {
			blk.args = e.Tool.Args
		}
	}
}

// digest identifies an event's bytes. Events decoded from the wire always
// marshal; one built with invalid raw JSON falls back to quoting it.
func digest(e protocol.Event) [sha256.Size]byte {
	b, err := json.Marshal(e)
	if err != nil {
		q := func(r json.RawMessage) json.RawMessage {
			if r == nil {
				return nil
			}
			s, _ := json.Marshal(string(r))
			return s
		}
		if e.Tool != nil {
			tc := *e.Tool
			tc.Args, tc.Result = q(tc.Args), q(tc.Result)
			e.Tool = &tc
		}
		c := make([]protocol.Block, len(e.Content))
		for i, x := range e.Content {
			x.Args = q(x.Args)
			c[i] = x
		}
		e.Content = c
		b, _ = json.Marshal(e)
	}
	return sha256.Sum256(b)
}

// Lines renders the transcript to lines of at most width cells (width <= 0:
// no wrapping), every piece of engine text sanitized: LF in a message body
// is a line break; headers, notices and markers stay one line each.
func (t *Transcript) Lines(width int) []string {
	var out []string
	for _, it := range t.items {
		if it.kind == itemTool && t.results[it.tool.callID] {
			continue
		}
		out = append(out, it.lines(width)...)
	}
	return out
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

func body(prefix, s string, width int) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		for _, w := range wrapLine(l, inner(width, Width(prefix))) {
			out = append(out, prefix+w)
		}
	}
	return out
}

func (m *message) lines(width int) []string {
	head := "[" + m.role
	if m.role == "toolResult" {
		head = "[tool result"
		if m.tool != nil {
			head += " " + m.tool.Name
			if m.tool.IsError {
				head += " (error)"
			}
		}
	}
	head += "]"
	switch {
	case !m.final || m.lastPart < 0:
		head += " …"
	case m.stopReason != "" && m.stopReason != "stop" && m.stopReason != "toolUse":
		head += " (" + m.stopReason + ")"
	}
	if m.continued && !m.final {
		head += " (start not seen)"
	}
	out := []string{clip(head, width)}
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

func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return unescapeHTML(b.Bytes())
}

// unescapeHTML undoes encoding/json's HTML escaping (\u003c, \u003e,
// \u0026), which every hop through json.Marshal adds to tool arguments, so
// a command line reads as the model wrote it ("2>&1", not
// "2\u003e\u00261"). Escapes are read left to right, so an escaped
// backslash followed by "u003e" stays as it is.
func unescapeHTML(b []byte) string {
	var out strings.Builder
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 >= len(b) {
			out.WriteByte(b[i])
			continue
		}
		if b[i+1] == 'u' && i+6 <= len(b) {
			switch strings.ToLower(string(b[i+2 : i+6])) {
			case "003c":
				out.WriteByte('<')
				i += 5
				continue
			case "003e":
				out.WriteByte('>')
				i += 5
				continue
			case "0026":
				out.WriteByte('&')
				i += 5
				continue
			}
		}
		out.WriteByte(b[i])
		out.WriteByte(b[i+1])
		i++
	}
	return out.String()
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
