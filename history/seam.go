package history

import (
	"slices"

	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/protocol"
)

// Seam is the snapshot as the engine seam's History (engine.History):
// each branch's messages, root first, whole. Pages, cursors and follows
// stay this package's own API, which the controller serves observers
// from; Seam is for engine-neutral readers. key is the session key the
// view reports (Pi's session file path).
//
// A branch is named by its leaf, the native id of its tip; the default
// leaf is the default branch's tip, the entry Pi continues on resume.
// Only message entries are listed: a compaction, a branch summary, a
// custom message or a notice has no place in engine.HistoryMessage, and
// Page shows them.
func (s *Snapshot) Seam(key string) engine.History { return seam{s: s, key: key} }

type seam struct {
	s   *Snapshot
	key string
}

func (h seam) SessionKey() string { return h.key }

func (h seam) New() bool { return h.s.New() }

func (h seam) DefaultLeaf() string {
	if t := h.s.idx.tips[h.s.DefaultBranch()]; t != nil {
		return t.id
	}
	return ""
}

func (h seam) Leaves() []string {
	var out []string
	for _, b := range h.s.Branches() {
		if b.Tip != "" {
			out = append(out, b.Tip)
		}
	}
	return out
}

// Messages lists the messages from the root to leaf ("": the default
// leaf); a leaf that is no branch's tip refuses unknown-branch.
func (h seam) Messages(leaf string) ([]engine.HistoryMessage, error) {
	if leaf == "" {
		if leaf = h.DefaultLeaf(); leaf == "" {
			return nil, nil // no entry yet: an empty history
		}
	}
	branch := ""
	for _, b := range h.s.Branches() {
		if b.Tip != "" && b.Tip == leaf {
			branch = b.Name
			break
		}
	}
	items, ok := h.s.idx.items(branch, h.s.header)
	if branch == "" || !ok {
		return nil, protocol.Refuse(protocol.CodeUnknownBranch, "%s has no branch ending at %q", h.s.path, cut(leaf))
	}
	var out []engine.HistoryMessage
	for _, it := range items {
		if it.e == nil {
			continue
		}
		v := it.e.shown()
		if v == nil || v.kind != KindMessage {
			continue
		}
		m := engine.HistoryMessage{ID: it.e.id, Role: v.role, Blocks: slices.Clone(v.blocks)}
		if !it.e.root {
			m.Parent = it.e.parent
		}
		if v.tool != nil {
			t := *v.tool
			m.Tool = &t
		}
		out = append(out, m)
	}
	return out, nil
}
