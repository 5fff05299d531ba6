package history

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/protocol"
)

// SessionVersion is the only session format version the reader accepts:
// Pi 0.85.1 migrates older files by rewriting them on load, which the
// reader must never do.
const SessionVersion = 3

// Header is line 1 of a session file. It is not a tree node.
type Header struct {
	// ID is Pi's session id: the native session identity the controller
	// pins at launch and compares with get_state's sessionId (K8).
	ID        string `json:"id"`
	Version   int    `json:"version"`
	Timestamp string `json:"timestamp,omitempty"`
	Cwd       string `json:"cwd,omitempty"`
	// ParentSession names the file this session was forked from. It is
	// shown as a notice and never opened.
	ParentSession string `json:"parentSession,omitempty"`
}

// record is one complete line after the header that is not blank: a valid
// entry, or a line that is not one (a notice at its file position).
type record struct {
	line int
	e    *entry  // nil for a line that is not an entry
	bad  *Notice // set when e is nil
}

// entry is a valid tree node: an object with a string type and a non-empty
// string id. Its view is nil when the entry is not shown (model and
// thinking changes, labels, session names, extension state).
type entry struct {
	id     string
	parent string
	root   bool // parentId null or absent
	typ    string
	// key is entryKey(id) when the light scan made it, else empty.
	key  string
	line int
	view *view
	// hint is what the light scan learnt of its parts; it never changes.
	hint partHint

	// raw is the line of an entry the light scan took, decoded into view
	// on first use (once): a page decodes only the entries it shows.
	raw    []byte
	decode sync.Once
}

// shown returns the entry's view, decoding its line on first use. The
// line was checked by the light scan, so parseLine takes it as this same
// entry; a line it would not (a defect of the light scan) shows as a
// malformed-entry notice rather than vanish.
func (e *entry) shown() *view {
	e.decode.Do(func() {
		if e.raw == nil {
			return
		}
		r := parseLine(e.line, e.raw)
		e.raw = nil
		if r == nil || r.e == nil || r.e.id != e.id {
			e.view = noticeView(NoticeMalformedEntry, fmt.Sprintf("line %d could not be decoded again", e.line))
			return
		}
		e.view = r.e.view
	})
	return e.view
}

// taken is the record of a line the light scan took and its entry,
// allocated together (takeRun allocates them for all its lines at once).
type taken struct {
	r record
	e entry
}

// entryKey is the entry's key, entryKey(e.id).
func (e *entry) entryKey() string {
	if e.key != "" {
		return e.key
	}
	return entryKey(e.id)
}

// lightRecord is parseLine for the common line: a valid entry whose body
// is left undecoded until a page shows it, filled into t and returned as
// &t.r. Any line the light scan does not take is parsed in full, and t is
// left unused.
func lightRecord(no int, b []byte, last string, t *taken) *record {
	env, ok := light(b, last)
	if !ok {
		return parseLine(no, b)
	}
	t.e = entry{id: env.id, key: env.key, parent: env.parent, root: env.root, typ: env.typ, line: no, hint: env.hint}
	if stateType(env.typ) {
		t.e.hint = hintNone // never shown (viewOf)
	} else {
		t.e.raw = b
	}
	t.r = record{line: no, e: &t.e}
	return &t.r
}

// view is what a shown entry renders as, before it is cut into parts.
type view struct {
	kind       string
	role       string
	timestamp  string
	stopReason string
	customType string
	tool       *protocol.Tool
	notice     *Notice
	blocks     []protocol.Block

	// cut caches the blocks cut into fragments: views are shared by every
	// snapshot of a follow chain, so each entry is cut once.
	cut   sync.Once
	frags []Fragment
	sizes []int
}

// Notice codes. A notice stands where something could not be shown.
const (
	NoticeMalformedLine    = "malformed-line"
	NoticeMalformedEntry   = "malformed-entry"
	NoticeUnexpectedHeader = "unexpected-header"
	NoticeUnknownType      = "unknown-entry-type"
	NoticeUnknownRole      = "unknown-role"
	NoticeMissingParent    = "missing-parent"
	NoticeLoop             = "loop"
	NoticeForked           = "forked-from-earlier-session"
)

// Part kinds.
const (
	KindMessage       = "message"
	KindCompaction    = "compaction"
	KindBranchSummary = "branchSummary"
	KindCustomMessage = "customMessage"
	KindNotice        = "notice"
)

// Notice says why something is not shown. Detail is for people; Code is
// stable.
type Notice struct {
	Code   string `json:"code"`
	Detail string `json:"detail,omitempty"`
}

// nativeEntry is the envelope every entry line shares. Type-specific
// fields stay raw so a bad one spoils only that entry's view, never its
// place in the tree.
type nativeEntry struct {
	Type       *string         `json:"type"`
	ID         *string         `json:"id"`
	ParentID   *string         `json:"parentId"`
	Timestamp  json.RawMessage `json:"timestamp"`
	Message    json.RawMessage `json:"message"`
	Summary    json.RawMessage `json:"summary"`
	Content    json.RawMessage `json:"content"`
	Display    json.RawMessage `json:"display"`
	CustomType json.RawMessage `json:"customType"`
}

type nativeMessage struct {
	messageFields
	Content json.RawMessage `json:"content"`
}

// messageFields are the message fields besides content.
type messageFields struct {
	Role       string `json:"role"`
	StopReason string `json:"stopReason"`
	ToolCallID string `json:"toolCallId"`
	ToolName   string `json:"toolName"`
	IsError    bool   `json:"isError"`
	CustomType string `json:"customType"`
	Display    bool   `json:"display"`
}

// fastEntry decodes the common line, a message with block-array content,
// in one pass. Any other shape, or any field that does not fit, falls
// back to nativeEntry, which decodes type by type.
type fastEntry struct {
	Type      *string `json:"type"`
	ID        *string `json:"id"`
	ParentID  *string `json:"parentId"`
	Timestamp string  `json:"timestamp"`
	Message   *struct {
		messageFields
		Content json.RawMessage `json:"content"`
	} `json:"message"`
}

// parseHeader checks line 1. Anything but a version 3 session header is
// not-a-pi-session.
func parseHeader(b []byte, path string) (Header, error) {
	var h struct {
		Type          *string         `json:"type"`
		Version       json.RawMessage `json:"version"`
		ID            *string         `json:"id"`
		Timestamp     any             `json:"timestamp"`
		Cwd           any             `json:"cwd"`
		ParentSession any             `json:"parentSession"`
	}
	if err := json.Unmarshal(b, &h); err != nil {
		return Header{}, protocol.Wrap(protocol.CodeNotAPiSession, err, "line 1 of %s is not a JSON object", path)
	}
	if h.Type == nil || *h.Type != "session" {
		return Header{}, protocol.Refuse(protocol.CodeNotAPiSession, "line 1 of %s is not a session header", path)
	}
	if string(h.Version) != "3" {
		return Header{}, protocol.Refuse(protocol.CodeNotAPiSession, "session %s has version %s, want %d", path, cut(string(h.Version)), SessionVersion)
	}
	if h.ID == nil || *h.ID == "" {
		return Header{}, protocol.Refuse(protocol.CodeNotAPiSession, "session header of %s has no id", path)
	}
	str := func(v any) string { s, _ := v.(string); return s }
	return Header{ID: *h.ID, Version: SessionVersion, Timestamp: str(h.Timestamp), Cwd: str(h.Cwd), ParentSession: str(h.ParentSession)}, nil
}

// parseLine turns one complete line (without its LF) into a record. A
// blank line returns nil: Pi skips it too.
func parseLine(no int, b []byte) *record {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	if r := parseFast(no, b); r != nil {
		return r
	}
	var n nativeEntry
	if err := json.Unmarshal(b, &n); err != nil {
		return &record{line: no, bad: &Notice{Code: NoticeMalformedLine, Detail: fmt.Sprintf("line %d is not a JSON object", no)}}
	}
	if n.Type == nil || n.ID == nil || *n.ID == "" {
		if n.Type != nil && *n.Type == "session" {
			return &record{line: no, bad: &Notice{Code: NoticeUnexpectedHeader, Detail: fmt.Sprintf("line %d is a second session header", no)}}
		}
		return &record{line: no, bad: &Notice{Code: NoticeMalformedLine, Detail: fmt.Sprintf("line %d has no entry type or id", no)}}
	}
	if *n.Type == "session" {
		return &record{line: no, bad: &Notice{Code: NoticeUnexpectedHeader, Detail: fmt.Sprintf("line %d is a second session header", no)}}
	}
	e := &entry{id: *n.ID, typ: *n.Type, line: no, root: n.ParentID == nil}
	if n.ParentID != nil {
		e.parent = *n.ParentID
	}
	e.view = viewOf(&n)
	if e.view != nil {
		var ts string
		if json.Unmarshal(n.Timestamp, &ts) == nil {
			e.view.timestamp = short(ts)
		}
	}
	return &record{line: no, e: e}
}

// parseFast decodes a message line in one pass, or returns nil.
func parseFast(no int, b []byte) *record {
	var n fastEntry
	if json.Unmarshal(b, &n) != nil || n.Type == nil || *n.Type != "message" || n.ID == nil || *n.ID == "" || n.Message == nil {
		return nil
	}
	e := &entry{id: *n.ID, typ: *n.Type, line: no, root: n.ParentID == nil}
	if n.ParentID != nil {
		e.parent = *n.ParentID
	}
	blocks, err := contentBlocks(n.Message.Content)
	if err != nil {
		return nil // the full parse names it
	}
	e.view = messageOf(&n.Message.messageFields, blocks)
	if e.view != nil {
		e.view.timestamp = short(n.Timestamp)
	}
	return &record{line: no, e: e}
}

// viewOf decides how an entry shows: nil for entry types that are state,
// not conversation.
func viewOf(n *nativeEntry) *view {
	switch *n.Type {
	case "message":
		return messageView(n.Message)
	case "compaction":
		return summaryView(KindCompaction, n.Summary)
	case "branch_summary":
		return summaryView(KindBranchSummary, n.Summary)
	case "custom_message":
		var display bool
		if json.Unmarshal(n.Display, &display) != nil || !display {
			return nil
		}
		blocks, err := contentBlocks(n.Content)
		if err != nil {
			return noticeView(NoticeMalformedEntry, "custom_message content: "+err.Error())
		}
		var ct string
		_ = json.Unmarshal(n.CustomType, &ct)
		return &view{kind: KindCustomMessage, role: "custom", customType: short(ct), blocks: blocks}
	}
	if stateType(*n.Type) {
		return nil
	}
	return noticeView(NoticeUnknownType, "entry type "+short(*n.Type))
}

// stateType reports whether entries of type typ are state (model and
// thinking changes, labels, session names, extension state), never shown.
func stateType(typ string) bool {
	switch typ {
	case "model_change", "thinking_level_change", "label", "session_info", "custom":
		return true
	}
	return false
}

func noticeView(code, detail string) *view {
	return &view{kind: KindNotice, notice: &Notice{Code: code, Detail: detail}}
}

// summaryView is the marker of a compaction or a branch summary: the
// summary text in place. retainedTail is not rendered: its messages are
// already on the path.
func summaryView(kind string, raw json.RawMessage) *view {
	var s string
	if len(raw) > 0 && json.Unmarshal(raw, &s) != nil {
		return noticeView(NoticeMalformedEntry, kind+" summary is not a string")
	}
	return &view{kind: kind, blocks: []protocol.Block{{Type: "text", Text: s}}}
}

// messageView maps a persisted AgentMessage onto the same blocks the
// engine puts on a live message-end, so one renderer serves both.
func messageView(raw json.RawMessage) *view {
	var m nativeMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return noticeView(NoticeMalformedEntry, "message: "+err.Error())
	}
	blocks, err := contentBlocks(m.Content)
	if err != nil {
		return noticeView(NoticeMalformedEntry, "message content: "+err.Error())
	}
	return messageOf(&m.messageFields, blocks)
}

// messageOf picks the view for a decoded message by role.
func messageOf(m *messageFields, blocks []protocol.Block) *view {
	switch m.Role {
	case "user", "assistant":
		return &view{kind: KindMessage, role: m.Role, stopReason: short(m.StopReason), blocks: blocks}
	case "toolResult":
		return &view{kind: KindMessage, role: m.Role, blocks: blocks,
			tool: &protocol.Tool{CallID: short(m.ToolCallID), Name: short(m.ToolName), IsError: m.IsError}}
	case "custom":
		if !m.Display {
			return nil
		}
		return &view{kind: KindCustomMessage, role: "custom", customType: short(m.CustomType), blocks: blocks}
	}
	return noticeView(NoticeUnknownRole, "message role "+short(m.Role))
}

// contentBlocks decodes string or block-array content.
func contentBlocks(raw json.RawMessage) ([]protocol.Block, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		return []protocol.Block{{Type: "text", Text: s}}, nil
	}
	if n := ArrayLen(raw, MaxBlocks); n > MaxBlocks {
		return nil, fmt.Errorf("more than %d content blocks: not decoded", MaxBlocks)
	}
	var nb []engine.NativeBlock
	if err := json.Unmarshal(raw, &nb); err != nil {
		return nil, err
	}
	out := make([]protocol.Block, 0, len(nb))
	for _, b := range nb {
		out = append(out, block(b))
	}
	return out, nil
}

// block converts one native block exactly as engine does for live
// events, after replacing over-long ids, names and mime types by their
// hash (never clipped).
func block(b engine.NativeBlock) protocol.Block {
	b.ID, b.Name, b.MimeType = short(b.ID), short(b.Name), short(b.MimeType)
	return b.Block()
}

// MaxBlocks is how many content blocks a message may hold to be shown: a
// block decodes to about 150 bytes from as few as 3 in the file (`{}`),
// so a tool appending one message of millions of them to its own session
// file made a read hold about 40 times the line, and a page of it 90
// times. Pi streams a message's blocks by an index the adapter bounds the
// same way (engine: a streamed content block index within [0, 4096)).
const MaxBlocks = 4096

// ArrayLen counts the elements of the JSON array raw (valid JSON, as a
// decoder's RawMessage is), stopping once it passes limit; anything but
// an array counts 0.
func ArrayLen(raw []byte, limit int) int {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '[' {
		return 0
	}
	depth, n, seen := 0, 0, false
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case c == '"':
			for i++; i < len(raw) && raw[i] != '"'; i++ {
				if raw[i] == '\\' {
					i++
				}
			}
			seen = seen || depth == 1
		case c == '[' || c == '{':
			seen = seen || depth == 1
			depth++
		case c == ']' || c == '}':
			depth--
		case c == ',' && depth == 1:
			if n++; n >= limit {
				return n + 1
			}
		case depth == 1 && c > ' ':
			seen = true
		}
	}
	if seen {
		n++
	}
	return n
}
