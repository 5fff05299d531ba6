package controller

import (
	"os"
	"sort"
	"time"

	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/history"
	hclaude "github.com/mosaic-agents/mosaic/history/claude"
	"github.com/mosaic-agents/mosaic/protocol"
)

// claudeView is one read of a Claude conversation's default branch, kept
// by the cursors of the pages read from it so that paging back never
// re-reads the transcript: consecutive pages of one view neither skip
// nor repeat a message, whatever the CLI appended meanwhile.
type claudeView struct {
	session, leaf string
	isNew         bool
	msgs          []engine.HistoryMessage
	// starts[i] is the branch-wide index of message i's first part (a
	// message is cut into parts as a Pi entry is), starts[len(msgs)]
	// the branch's part count.
	starts []int
}

func newClaudeView(session, leaf string, isNew bool, msgs []engine.HistoryMessage) *claudeView {
	v := &claudeView{session: session, leaf: leaf, isNew: isNew, msgs: msgs, starts: make([]int, len(msgs)+1)}
	for i, m := range msgs {
		v.starts[i+1] = v.starts[i] + history.CutCount(claudeMessage(m))
	}
	return v
}

// count is the number of parts of the view's branch.
func (v *claudeView) count() int { return v.starts[len(v.msgs)] }

// locate returns the message holding branch-wide part p and p's index
// among that message's parts.
func (v *claudeView) locate(p int) (msg, part int) {
	msg = sort.Search(len(v.msgs), func(i int) bool { return v.starts[i+1] > p })
	return msg, p - v.starts[msg]
}

func claudeMessage(m engine.HistoryMessage) history.Message {
	return history.Message{ID: m.ID, Role: m.Role, Tool: m.Tool, Blocks: m.Blocks}
}

// claudeRead reads the transcript (history/claude: only the file the
// binding names, read-only, sidechains apart, bookkeeping lines not
// rendered) into a view of its default leaf's branch.
func (c *Controller) claudeRead() (*claudeView, error) {
	c.readers <- struct{}{}
	defer func() { <-c.readers }()
	cv := c.cfg.Conversation
	t, err := c.claudeLatest(cv)
	if err != nil {
		return nil, err
	}
	leaf := t.DefaultLeaf()
	var msgs []engine.HistoryMessage
	if !t.New() {
		if msgs, err = t.Messages(leaf); err != nil {
			return nil, err
		}
	}
	return newClaudeView(cv.SessionKey(), leaf, t.New(), msgs), nil
}

// claudeLatest is the transcript as it is now, for an observe: a Follow
// of the one the last observe read, which hashes the bytes read before
// and parses only the lines appended since (a parse of every line of a
// 10 MB transcript costs about 90 line splits of it, the hash two), or a
// fresh Read without one, or when the Follow refuses: a transcript
// replaced or rewritten is shown as it is now, as a Read shows it (the
// foreign-writer watch, which follows its own chain, is what judges the
// rewrite).
func (c *Controller) claudeLatest(cv *conversations.Conversation) (*hclaude.Transcript, error) {
	if cv.Claude == nil {
		return nil, protocol.Refuse(protocol.CodeConfiguration, "conversation %s names engine_kind claude but has no [claude] table", cv.ID)
	}
	c.snapMu.Lock()
	prev := c.lastClaude
	c.snapMu.Unlock()
	ref := c.claudeRef(cv)
	read := func() (*hclaude.Transcript, error) {
		return followOrRead(prev, hclaude.Follow, func() (*hclaude.Transcript, error) { return hclaude.Read(ref) })
	}
	t, err := read()
	// The CLI writes a line in one write, but an observe can come between
	// its bytes: neither Read nor Follow takes a last line without its LF.
	// Wait for the line as the watch does; one that stays half written is
	// answered as it is.
	for try := 0; err != nil && try < halfLineTries && c.halfLine(ref); try++ {
		time.Sleep(halfLineWait)
		t, err = read()
	}
	if err != nil {
		return nil, err
	}
	c.snapMu.Lock()
	c.lastClaude = t
	c.snapMu.Unlock()
	return t, nil
}

// An observe waits for a half written last line of a transcript at most
// halfLineTries times halfLineWait.
const (
	halfLineTries = 20
	halfLineWait  = 10 * time.Millisecond
)

// halfLine says the transcript ref names ends in a line without its LF.
func (c *Controller) halfLine(ref hclaude.Ref) bool {
	path, err := ref.Path()
	if err != nil {
		return false
	}
	fi, err := os.Lstat(path)
	return err == nil && !endsLine(path, fi.Size())
}

// claudePageReserve is kept free of parts under history.MaxPageBytes for
// the page's own fields and the record that carries it (as history's
// pages keep).
const claudePageReserve = 64 << 10

// claudePageBefore encodes the page of v ending before part end: as many
// parts as fit history.MaxPageParts and history.MaxPageBytes, in the
// shape of Pi's pages (More: the view holds parts after the page). It
// returns the page's first part: a cursor reads the page before it, so
// pages of one view meet without gap or overlap.
func claudePageBefore(v *claudeView, end int) ([]byte, int, error) {
	var rev []history.Part
	used, start := claudePageReserve, end
	// cut holds the parts from..k of message at, where k is the first
	// part of it the page reads: the page reads no more parts than
	// MaxPageParts, so no more of a message of many are cut.
	at, from, cut := -1, 0, []history.Part(nil)
	for start > 0 && len(rev) < history.MaxPageParts {
		i, k := v.locate(start - 1)
		if i != at {
			at, from = i, max(0, k+1-history.MaxPageParts)
			cut = history.CutRange(claudeMessage(v.msgs[i]), from, k+1)
		}
		if k-from >= len(cut) {
			return nil, 0, protocol.Refuse(protocol.CodeUnreadable, "message %d of the transcript was counted as %d parts and cut into %d", i, v.starts[i+1]-v.starts[i], from+len(cut))
		}
		b, err := protocol.Marshal(cut[k-from])
		if err != nil {
			return nil, 0, protocol.Wrap(protocol.CodeMalformed, err, "encode message %d of the transcript", i)
		}
		if used+len(b)+1 > history.MaxPageBytes && len(rev) > 0 {
			break
		}
		used += len(b) + 1
		rev = append(rev, cut[k-from])
		start--
	}
	// The leaf is the last entry's uuid, as the engine wrote it: past
	// 1024 bytes its hash, so the page's own fields stay in its reserve.
	branch := history.Short(v.leaf)
	page := history.Page{Session: v.session, Branch: branch, DefaultBranch: branch, New: v.isNew,
		From: start, More: end < v.count(), Parts: make([]history.Part, 0, len(rev))}
	for i := len(rev) - 1; i >= 0; i-- {
		page.Parts = append(page.Parts, rev[i])
	}
	raw, err := protocol.Marshal(page)
	if err != nil {
		return nil, 0, protocol.Wrap(protocol.CodeMalformed, err, "encode the history page")
	}
	return raw, start, nil
}

// parts and pageBefore make a view a pager.
func (v *claudeView) parts() (int, error) { return v.count(), nil }

func (v *claudeView) pageBefore(end int) ([]byte, int, error) { return claudePageBefore(v, end) }
