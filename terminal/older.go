package terminal

import (
	"slices"

	"github.com/mosaic-agents/mosaic/history"
)

// The marker at the top of a transcript with a history page: what is
// above it.
const (
	MarkerLoading   = "loading older history…"
	MarkerBeginning = "beginning of the conversation"
	MarkerMore      = "older history: PageUp at the top reads it"
)

// Older is the history read back above a view's page with observe
// cursors: the parts of the older pages, oldest first, and whether the
// next one is being read. The zero value holds nothing. The pages of one
// cursor chain join without gap or overlap, so their parts and the
// view's page are one run of the branch.
type Older struct {
	// From is the branch-wide index of Parts[0].
	From    int
	Parts   []history.Part
	Loading bool
}

// Prepend puts the parts of p, the page before those held, above them.
func (o *Older) Prepend(p *history.Page) {
	o.Parts = append(slices.Clone(p.Parts), o.Parts...)
	o.From = p.From
}

// addPages adds the marker, then the older parts and the page's parts as
// one page, so an entry split at a page boundary is one message again.
// It records as head the items above the first entry that starts on the
// page: those are what a prepend changes, and everything below them stays
// line for line.
func (t *Transcript) addPages(o Older, p *history.Page) {
	from := p.From
	if len(o.Parts) > 0 {
		from = o.From
	}
	switch {
	case o.Loading:
		t.notice(MarkerLoading)
	case from == 0:
		t.notice(MarkerBeginning)
	default:
		t.notice(MarkerMore)
	}
	parts := append(slices.Clip(o.Parts), p.Parts...)
	t.head = len(t.items)
	for i := 0; i < len(parts); {
		n := group(parts[i:])
		t.addEntry(parts[i : i+n])
		if i < len(o.Parts) || (i == len(o.Parts) && parts[i].Part > 0) {
			t.head = len(t.items)
		}
		i += n
	}
}

// HeadLines counts the lines, at width, of the items above the first
// entry that starts on the newest page: the marker and the older history.
// A prepend grows it and changes nothing below it, which is how the
// Screen keeps its viewport still.
func (t *Transcript) HeadLines(width int) int {
	n := 0
	for _, it := range t.items[:t.head] {
		n += len(it.lines(width))
	}
	return n
}
