package terminal

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mosaic-agents/mosaic/history"
	"github.com/mosaic-agents/mosaic/protocol"
)

// AddNotice appends a notice line.
func (t *Transcript) AddNotice(text string) {
	t.init()
	t.notice(text)
}

// AddPage appends a history page: every shown entry as a finished
// message, in page order, with its parts and fragments joined again; a
// notice part (something the reader could not show) as a notice. An entry
// whose first part is on an earlier page, or whose last part is on a
// later one, says so. Compose adds the older pages read back above it as
// one page with it.
func (t *Transcript) AddPage(p *history.Page) {
	t.init()
	for parts := p.Parts; len(parts) > 0; {
		n := group(parts)
		t.addEntry(parts[:n])
		parts = parts[n:]
	}
}

// group counts the leading parts of one entry: consecutive, same entry,
// increasing part index.
func group(parts []history.Part) int {
	n := 1
	for n < len(parts) && parts[n].Entry == parts[0].Entry && parts[n].Part > parts[n-1].Part {
		n++
	}
	return n
}

// addEntry adds the consecutive parts of one entry.
func (t *Transcript) addEntry(ps []history.Part) {
	first, last := ps[0], ps[len(ps)-1]
	if first.Kind == history.KindNotice {
		s := "history: unavailable entry"
		if first.Notice != nil {
			s = "history: " + first.Notice.Code
			if first.Notice.Detail != "" {
				s += ": " + first.Notice.Detail
			}
		}
		t.notice(s)
		return
	}
	if first.Part > 0 {
		t.notice(fmt.Sprintf("history: entry %s starts before this page", first.Entry))
	}
	h := HistoryMessage{Role: roleOf(first), StopReason: first.StopReason, Tool: first.Tool, Content: joinFragments(ps)}
	t.AddHistory(h)
	if !last.LastPart {
		t.notice(fmt.Sprintf("history: entry %s continues after this page", last.Entry))
	}
}

// roleOf names what a part shows in its message header.
func roleOf(p history.Part) string {
	switch p.Kind {
	case history.KindMessage:
		return p.Role
	case history.KindCustomMessage:
		if p.CustomType != "" {
			return "custom " + p.CustomType
		}
		return "custom"
	case history.KindCompaction:
		return "compaction summary"
	case history.KindBranchSummary:
		return "branch summary"
	}
	return p.Kind
}

// joinFragments rebuilds an entry's blocks from its fragments: the text
// of a block's fragments concatenated in order, and a toolCall whose
// arguments were carried as text turned back into its arguments.
func joinFragments(ps []history.Part) []protocol.Block {
	var out []protocol.Block
	var texts []*strings.Builder
	at := map[int]int{}
	for _, p := range ps {
		for _, f := range p.Blocks {
			i, ok := at[f.Block]
			if !ok {
				i = len(out)
				at[f.Block] = i
				out = append(out, f.Content)
				texts = append(texts, &strings.Builder{})
			}
			texts[i].WriteString(f.Content.Text)
		}
	}
	for i := range out {
		out[i].Text = texts[i].String()
		if out[i].Type == "toolCall" && len(out[i].Args) == 0 && out[i].Text != "" && json.Valid([]byte(out[i].Text)) {
			out[i].Args, out[i].Text = json.RawMessage(out[i].Text), ""
		}
	}
	return out
}
