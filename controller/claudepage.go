package controller

import (
	"github.com/mosaic-agents/mosaic/history"
	"github.com/mosaic-agents/mosaic/protocol"
)

// claudePage is the observe page of a Claude conversation, built from its
// transcript (history/claude: only the file the binding names, read-only,
// sidechains apart, bookkeeping lines not rendered): the newest messages
// of the default leaf's branch, at most history.MaxPageParts of them, one
// part per message and one fragment per block, in the page shape Pi's
// pages have. More says older messages were left out: this wave pages
// no further back (observe with a cursor refuses cursor-unknown).
func (c *Controller) claudePage() ([]byte, error) {
	c.readers <- struct{}{}
	defer func() { <-c.readers }()
	cv := c.cfg.Conversation
	t, err := c.claudeTranscript(cv)
	if err != nil {
		return nil, err
	}
	leaf := t.DefaultLeaf()
	page := history.Page{Session: cv.SessionKey(), Branch: leaf, DefaultBranch: leaf, New: t.New(), Parts: []history.Part{}}
	if !t.New() {
		msgs, err := t.Messages(leaf)
		if err != nil {
			return nil, err
		}
		if n := len(msgs) - history.MaxPageParts; n > 0 {
			page.From, page.More, msgs = n, true, msgs[n:]
		}
		for _, m := range msgs {
			p := history.Part{Entry: "n." + m.ID, Native: m.ID, Kind: "message", Role: m.Role, Tool: m.Tool, LastPart: true}
			for i, b := range m.Blocks {
				p.Blocks = append(p.Blocks, history.Fragment{Block: i, LastFragment: true, Content: b})
			}
			page.Parts = append(page.Parts, p)
		}
	}
	raw, err := protocol.Marshal(page)
	if err != nil {
		return nil, protocol.Wrap(protocol.CodeMalformed, err, "encode the history page")
	}
	return raw, nil
}
