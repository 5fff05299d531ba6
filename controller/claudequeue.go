package controller

import (
	"fmt"
	"path/filepath"

	"github.com/mosaic-agents/mosaic/conversations"
	hclaude "github.com/mosaic-agents/mosaic/history/claude"
	"github.com/mosaic-agents/mosaic/queue"
)

// claudeRef names the conversation's transcript the way the binding
// does.
func (c *Controller) claudeRef(cv *conversations.Conversation) hclaude.Ref {
	d := conversations.ClaudeDirs(filepath.Dir(c.cfg.Claims.Root()), cv.ID)
	return hclaude.Ref{ConfigDir: d.Config, Project: cv.Project, Session: cv.Claude.Session}
}

// sessionSize is the position a dispatch records before the engine
// write: the Pi session file's size, or the Claude transcript's.
func (c *Controller) sessionSize() (int64, error) {
	cv := c.cfg.Conversation
	if cv.IsClaude() && cv.Claude != nil {
		return hclaude.Size(c.claudeRef(cv))
	}
	return queue.SessionSize(cv.Session)
}

// userEntriesFrom lists the user messages whose lines start at or after
// from, by the digest of their text: Pi's session file
// (queue.UserEntriesFrom) or the Claude transcript's prompt lines
// (hclaude.PromptsFrom: no tool result, no sidechain). The matching rule
// (once per item, only after its recorded position) is provenDeliveries'.
func (c *Controller) userEntriesFrom(from int64) ([]queue.UserEntry, error) {
	cv := c.cfg.Conversation
	if !cv.IsClaude() {
		return queue.UserEntriesFrom(cv.Session, from)
	}
	if cv.Claude == nil {
		return nil, fmt.Errorf("conversation %s names engine_kind claude but has no [claude] table", cv.ID)
	}
	ps, err := hclaude.PromptsFrom(c.claudeRef(cv), from)
	if err != nil {
		return nil, err
	}
	out := make([]queue.UserEntry, 0, len(ps))
	for _, p := range ps {
		out = append(out, queue.UserEntry{Offset: p.Offset, Digest: queue.Digest(p.Text)})
	}
	return out, nil
}
