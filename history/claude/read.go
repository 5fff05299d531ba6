package claude

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/history"
	"github.com/mosaic-agents/mosaic/internal/shape"
	"github.com/mosaic-agents/mosaic/protocol"
)

// Version is the only Claude Code version whose transcripts are read.
const Version = "2.1.328"

// Ref names one transcript the way a binding does.
type Ref struct {
	// ConfigDir is the conversation's CLAUDE_CONFIG_DIR (controller-owned).
	ConfigDir string
	// Project is the engine's working directory; it selects the slug.
	Project string
	// Session is the session UUID.
	Session string
}

// Slug is the CLI's project directory name for dir: every UTF-16 code
// unit outside [a-zA-Z0-9] becomes '-' (DIGEST §8; the CLI's JavaScript
// replaces per code unit, so a character beyond U+FFFF gives two). Longer
// than 200 the CLI appends a hash this reader does not reproduce: such
// projects refuse. dir must be the real path the CLI's getcwd reports.
func Slug(dir string) string {
	var b strings.Builder
	for _, r := range dir {
		switch {
		case r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'):
			b.WriteRune(r)
		case r > 0xFFFF:
			b.WriteString("--")
		default:
			b.WriteByte('-')
		}
	}
	return b.String()
}

// Path returns the one file Ref names, or refuses unsafe-path.
func (r Ref) Path() (string, error) {
	if !shape.UUID(r.Session) {
		return "", protocol.Refuse(protocol.CodeUnsafePath, "claude session %q is not a session UUID", cutID(r.Session))
	}
	if !filepath.IsAbs(r.ConfigDir) || filepath.Clean(r.ConfigDir) != r.ConfigDir || !filepath.IsAbs(r.Project) || filepath.Clean(r.Project) != r.Project {
		return "", protocol.Refuse(protocol.CodeUnsafePath, "claude config dir %q and project %q must be clean absolute paths", r.ConfigDir, r.Project)
	}
	slug := Slug(r.Project)
	if len(slug) > 200 {
		return "", protocol.Refuse(protocol.CodeUnsafePath, "project path %q is over 200 characters; its transcript directory name is hashed", r.Project)
	}
	return filepath.Join(r.ConfigDir, "projects", slug, r.Session+".jsonl"), nil
}

// Entry is one line of the parent chain.
type Entry struct {
	UUID, Parent string
	// Type is user, assistant, attachment or system.
	Type string
	// Role is user, assistant or toolResult for rendered entries, "" for
	// bookkeeping links.
	Role      string
	Blocks    []protocol.Block
	Tool      *protocol.Tool
	Sidechain bool
	Line      int
	// Prompt marks a user prompt line (promptSource set): one a host sent,
	// not a tool result or a marker the CLI wrote itself.
	Prompt bool
	// Notification marks the user line the CLI writes, unannounced, when a
	// run_in_background task ends while it is idle (promptSource
	// "system", origin kind "task-notification"): Prompt is set too.
	Notification bool
	// Attachment is an attachment line's attachment type.
	Attachment string
	// Said is what the line tells the model (said.go): a user or
	// assistant line's message, a system line's subtype and content, a
	// prompt_snapshot's snapshot; zero for other attachments, or when it
	// does not decode.
	Said Said
}

// Transcript is what one read found.
type Transcript struct {
	ref     Ref
	path    string
	isNew   bool
	entries map[string]*Entry
	order   []string // main-chain entries in file order
	side    []Entry
	kids    map[string]int
	// Bookkeeping counts lines that are not rendered.
	Bookkeeping int
	// LastPromptLeaf is the last last-prompt line's leafUuid (a hint).
	LastPromptLeaf string
	// unlisted counts the lines of no type Claude Code 2.1.328 was seen
	// to write, and conversation lines without a uuid; firstUnlisted
	// names the first (Unlisted).
	unlisted      int
	firstUnlisted string

	// What the read covered, for Follow: the file, its first size bytes
	// (lines lines, the last one without LF when partial) and their digest.
	dev, ino uint64
	size     int64
	lines    int
	partial  bool
	digest   []byte
}

var _ engine.History = (*Transcript)(nil)

// line is the part of a transcript line the reader needs.
type line struct {
	Type        string          `json:"type"`
	UUID        string          `json:"uuid"`
	ParentUUID  *string         `json:"parentUuid"`
	IsSidechain bool            `json:"isSidechain"`
	Version     string          `json:"version"`
	SessionID   string          `json:"sessionId"`
	Cwd         string          `json:"cwd"`
	Message     json.RawMessage `json:"message"`
	LeafUUID    string          `json:"leafUuid"`
	Mode        string          `json:"mode"` // a mode line's
	PromptSrc   string          `json:"promptSource"`
	Subtype     string          `json:"subtype"`
	Content     json.RawMessage `json:"content"`
	Attachment  json.RawMessage `json:"attachment"`
	Origin      struct {
		Kind string `json:"kind"`
	} `json:"origin"`
	// A compact_boundary's (said.go).
	LogicalParent   string          `json:"logicalParentUuid"`
	CompactMetadata json.RawMessage `json:"compactMetadata"`
}

type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// MaxEntryID bounds an entry's uuid and its parentUuid.
const MaxEntryID = 1024

// MaxLine bounds one transcript line.
const MaxLine = 64 << 20

// Read reads the transcript ref names. A missing file is a new session.
func Read(ref Ref) (*Transcript, error) {
	path, err := ref.Path()
	if err != nil {
		return nil, err
	}
	t := blank(ref, path)
	f, err := history.OpenRead(path, history.DefaultMaxSize)
	if err != nil {
		return nil, err
	}
	if f == nil {
		t.isNew = true
		return t, nil
	}
	defer f.Close()
	if err := t.identify(f); err != nil {
		return nil, err
	}
	return t, t.scan(f, sha256.New())
}

// Empty is the transcript ref names as a new session: no file, nothing
// read. Following it reads the file afresh, all of it appended since.
func Empty(ref Ref) (*Transcript, error) {
	path, err := ref.Path()
	if err != nil {
		return nil, err
	}
	t := blank(ref, path)
	t.isNew = true
	return t, nil
}

// blank is a transcript of path with nothing read yet.
func blank(ref Ref, path string) *Transcript {
	return &Transcript{ref: ref, path: path, entries: map[string]*Entry{}, kids: map[string]int{}}
}

// identify records which file f is, so a follow can tell it was replaced.
func (t *Transcript) identify(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return protocol.Wrap(protocol.CodeUnreadable, err, "stat claude transcript %s", t.path)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		t.dev, t.ino = uint64(st.Dev), st.Ino
	}
	return nil
}

// decoded is one line decoded, with what judging it against the lines
// before it (apply) needs. Decoding needs nothing of those lines, so a
// large read decodes its lines in parallel and applies them in order.
type decoded struct {
	blank bool
	l     line
	err   error // not a JSON line
	shown Entry // the Role, Blocks, Tool and Said of a line
}

// decode decodes line b.
func decode(b []byte) decoded {
	if len(bytes.TrimSpace(b)) == 0 {
		return decoded{blank: true}
	}
	// l, not a field of the result, is what json.Unmarshal makes escape:
	// a blank line allocates nothing, as before lines were decoded apart.
	var l line
	if err := json.Unmarshal(b, &l); err != nil {
		return decoded{err: err}
	}
	var d decoded
	switch l.Type {
	case "user", "assistant":
		render(&d.shown, l.Message)
		d.shown.Said, _ = MessageSaid(l.Message)
	case "system":
		if l.Subtype == "compact_boundary" {
			d.shown.Said, _ = BoundarySaid(l.Content, l.LogicalParent, l.CompactMetadata)
		} else {
			d.shown.Said, _ = SystemSaid(l.Subtype, l.Content)
		}
	case "attachment":
		var a struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(l.Attachment, &a)
		d.shown.Attachment = a.Type
		if a.Type == "prompt_snapshot" {
			d.shown.Said, _ = SnapshotSaid(l.Attachment)
		}
	}
	// Digested: the copies are not kept.
	l.Message, l.Content, l.Attachment, l.CompactMetadata = nil, nil, nil, nil
	d.l = l
	return d
}

// bookkeeping are the line types without a uuid Claude Code 2.1.328 was
// seen to write (DIGEST §8 and the real CLI's transcripts): none reaches
// the model on a resume (forged api-request, api-request-shape,
// api-request-blob, tools-used, atis-latch, last-prompt, cost-state and
// summary lines were measured not to), except a mode line, which sets
// the resumed CLI's mode: one saying "coordinator" took Bash, Edit, Read
// and Write from the tools of the first resumed request (measured). The
// CLI was seen to write only "normal", so any other mode is unlisted, as
// is any other type: the CLI may load it in a way no recording shows.
var bookkeeping = map[string]bool{
	"queue-operation": true, "api-request": true, "api-request-shape": true, "api-request-blob": true,
	"atis-latch": true, "last-prompt": true, "tools-used": true, "cost-state": true, "mode": true,
}

// unlist counts line n, of type typ, as unlisted.
func (t *Transcript) unlist(n int, typ string) {
	if t.unlisted == 0 {
		t.firstUnlisted = fmt.Sprintf("line %d (type %q)", n, cutID(typ))
	}
	t.unlisted++
}

// Unlisted counts the lines of a type Claude Code 2.1.328 was never seen
// to write, and the user, assistant, attachment or system lines without a
// uuid, and names the first: lines a reader cannot say how the CLI loads.
func (t *Transcript) Unlisted() (int, string) { return t.unlisted, t.firstUnlisted }

// apply judges decoded line d, line n of the file, against the lines
// before it and adds what it shows.
func (t *Transcript) apply(d *decoded, n int) error {
	if d.blank {
		return nil
	}
	if d.err != nil {
		return protocol.Wrap(protocol.CodeUnreadable, d.err, "%s:%d is not a JSON line", t.path, n)
	}
	l := &d.l
	if l.Version != "" && l.Version != Version {
		return protocol.Refuse(protocol.CodeUnsupportedHarness, "%s:%d was written by Claude Code %s; this reader knows only %s", t.path, n, cutID(l.Version), Version)
	}
	if l.SessionID != "" && l.SessionID != t.ref.Session && !l.IsSidechain {
		return protocol.Refuse(protocol.CodeUnsafePath, "%s:%d belongs to session %s, not %s", t.path, n, cutID(l.SessionID), t.ref.Session)
	}
	if l.Type == "last-prompt" {
		t.LastPromptLeaf = l.LeafUUID
	}
	switch l.Type {
	case "user", "assistant", "attachment", "system":
	default:
		if !bookkeeping[l.Type] || l.Type == "mode" && l.Mode != "normal" {
			t.unlist(n, l.Type)
		}
		t.Bookkeeping++
		return nil
	}
	if l.UUID == "" {
		t.unlist(n, l.Type)
		t.Bookkeeping++
		return nil
	}
	if l.Version == "" {
		return protocol.Refuse(protocol.CodeUnsupportedHarness, "%s:%d carries no version", t.path, n)
	}
	if l.Cwd != "" && l.Cwd != t.ref.Project && !strings.HasPrefix(l.Cwd, t.ref.Project+"/") {
		return protocol.Refuse(protocol.CodeForeignProject, "%s:%d ran in %s, outside the project %s", t.path, n, l.Cwd, t.ref.Project)
	}
	// Claude Code names the entries it makes with a random UUID, but a
	// prompt line with the uuid its host sent, verbatim: any string (an
	// SDK host's "m1", a Swift host's upper case UUID). An id is carried
	// into every record that names the leaf (the binding, a page), so one
	// past MaxEntryID is refused: no host names a message so.
	if parent := l.ParentUUID; len(l.UUID) > MaxEntryID || (parent != nil && len(*parent) > MaxEntryID) {
		return protocol.Refuse(protocol.CodeUnreadable, "%s:%d names its entry or its parent by an id over %d bytes (%q...); Claude Code writes a UUID or the id its host sent", t.path, n, MaxEntryID, cutID(l.UUID))
	}
	e := &Entry{UUID: l.UUID, Type: l.Type, Sidechain: l.IsSidechain, Line: n, Prompt: l.Type == "user" && l.PromptSrc != "",
		Attachment: d.shown.Attachment, Said: d.shown.Said,
		Notification: l.Type == "user" && l.PromptSrc == "system" && l.Origin.Kind == "task-notification"}
	if l.ParentUUID != nil {
		e.Parent = *l.ParentUUID
	}
	if l.Type == "user" || l.Type == "assistant" {
		e.Role, e.Blocks, e.Tool = d.shown.Role, d.shown.Blocks, d.shown.Tool
	} else {
		t.Bookkeeping++
	}
	if e.Sidechain {
		t.side = append(t.side, *e)
		return nil
	}
	if _, dup := t.entries[e.UUID]; dup {
		return protocol.Refuse(protocol.CodeUnreadable, "%s:%d repeats entry %s", t.path, n, cutID(e.UUID))
	}
	t.entries[e.UUID] = e
	t.order = append(t.order, e.UUID)
	if e.Parent != "" {
		t.kids[e.Parent]++
	}
	return nil
}

// render fills the rendered role and blocks of a user or assistant line;
// a tool result makes the entry a toolResult message.
func render(e *Entry, raw json.RawMessage) {
	var m message
	_ = json.Unmarshal(raw, &m)
	e.Role = m.Role
	for _, b := range Blocks(m.Content) {
		if b.Type == "tool_result" {
			e.Role = "toolResult"
			e.Tool = &protocol.Tool{CallID: b.ToolUseID, IsError: b.IsError, Result: b.Content}
		}
		e.Blocks = append(e.Blocks, b.Block())
	}
}

// SessionKey is the session UUID.
func (t *Transcript) SessionKey() string { return t.ref.Session }

// New says the transcript does not exist yet.
func (t *Transcript) New() bool { return t.isNew }

// Path is the one file read.
func (t *Transcript) Path() string { return t.path }

// Leaves lists every childless main-chain entry, in file order.
func (t *Transcript) Leaves() []string {
	var out []string
	for _, id := range t.order {
		if t.kids[id] == 0 {
			out = append(out, id)
		}
	}
	return out
}

// DefaultLeaf is the newest childless main-chain entry.
func (t *Transcript) DefaultLeaf() string {
	l := t.Leaves()
	if len(l) == 0 {
		return ""
	}
	return l[len(l)-1]
}

// Messages returns the rendered entries from the root to leaf ("" for
// the default leaf).
func (t *Transcript) Messages(leaf string) ([]engine.HistoryMessage, error) {
	if leaf == "" {
		leaf = t.DefaultLeaf()
		if leaf == "" {
			return nil, nil
		}
	}
	e, ok := t.entries[leaf]
	if !ok || t.kids[leaf] != 0 {
		return nil, protocol.Refuse(protocol.CodeUnknownBranch, "%s has no branch ending at %q", t.path, cutID(leaf))
	}
	var rev []engine.HistoryMessage
	for seen := 0; e != nil; seen++ {
		if seen > len(t.entries) {
			return nil, protocol.Refuse(protocol.CodeUnreadable, "%s: the parent chain of %s loops", t.path, cutID(leaf))
		}
		if e.Role != "" {
			rev = append(rev, engine.HistoryMessage{ID: e.UUID, Parent: e.Parent, Role: e.Role, Blocks: e.Blocks, Tool: e.Tool})
		}
		e = t.entries[e.Parent]
	}
	out := make([]engine.HistoryMessage, len(rev))
	for i := range rev {
		out[i] = rev[len(rev)-1-i]
	}
	return out, nil
}

// Entry returns the main-chain entry id, if the transcript holds it.
func (t *Transcript) Entry(id string) (Entry, bool) {
	e, ok := t.entries[id]
	if !ok {
		return Entry{}, false
	}
	return *e, true
}

// Order lists the main-chain entry ids in file order.
func (t *Transcript) Order() []string { return append([]string(nil), t.order...) }

// Sidechain returns the sidechain (subagent) entries, apart from every
// main branch.
func (t *Transcript) Sidechain() []Entry { return append([]Entry(nil), t.side...) }

func cutID(s string) string {
	if len(s) > 80 {
		s = s[:80]
	}
	q := fmt.Sprintf("%q", s)
	return q[1 : len(q)-1]
}

// Ancestor reports whether anc is on the parent chain of id (id
// included): the K8 check that a resumed session continues the pinned
// leaf.
func (t *Transcript) Ancestor(anc, id string) bool {
	for seen := 0; id != "" && seen <= len(t.entries); seen++ {
		if id == anc {
			return true
		}
		e, ok := t.entries[id]
		if !ok {
			return false
		}
		id = e.Parent
	}
	return false
}
