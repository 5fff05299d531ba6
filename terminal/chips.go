package terminal

import (
	"fmt"
	"strings"
)

// Chip is one waiting queue item as the composer shows it.
type Chip struct {
	ID       string
	Revision int
	State    string // queued or dispatched
	Text     string
}

// maxChips is how many chips show under the composer; the rest are
// counted.
const maxChips = 4

// Chips holds the queue under the composer: the waiting items, the pause,
// the selected chip and the one being edited. The composer never locks:
// a prompt typed while a turn runs is queued and shows here.
type Chips struct {
	Items  []Chip
	Paused string // why the queue is paused; "" when it is not
	sel    string // id of the selected chip, "" for none
	edit   *Chip  // the chip whose text the composer holds for an edit
}

// Set replaces the items; a selection or edit of an item that left the
// queue ends.
func (c *Chips) Set(items []Chip, paused string) {
	c.Items, c.Paused = items, paused
	if c.index(c.sel) < 0 {
		c.sel = ""
	}
}

func (c *Chips) index(id string) int {
	for i, it := range c.Items {
		if it.ID == id {
			return i
		}
	}
	return -1
}

// Selected returns the selected chip, if any.
func (c *Chips) Selected() (Chip, bool) {
	if i := c.index(c.sel); i >= 0 {
		return c.Items[i], true
	}
	return Chip{}, false
}

// Editing returns the chip being edited, if any.
func (c *Chips) Editing() (Chip, bool) {
	if c.edit == nil {
		return Chip{}, false
	}
	return *c.edit, true
}

// move selects the previous (up) or next chip; past either end there is
// no selection.
func (c *Chips) move(up bool) {
	n := len(c.Items)
	if n == 0 {
		c.sel = ""
		return
	}
	i := c.index(c.sel)
	switch {
	case i < 0 && up:
		i = n - 1
	case i < 0:
		i = 0
	case up:
		i--
	default:
		i++
	}
	if i < 0 || i >= n {
		c.sel = ""
		return
	}
	c.sel = c.Items[i].ID
}

// Lines renders the chips: the pause first, then one line per item, the
// selected one marked.
func (c *Chips) Lines(width int) []string {
	var out []string
	if c.Paused != "" {
		out = append(out, clip("queue paused: "+SanitizeLine(c.Paused)+" (^P resumes)", width))
	}
	for i, it := range c.Items {
		if i == maxChips {
			out = append(out, clip(fmt.Sprintf("  … %d more queued", len(c.Items)-maxChips), width))
			break
		}
		mark := "  "
		if it.ID == c.sel {
			mark = "> "
		}
		text := it.Text
		if j := strings.IndexByte(text, '\n'); j >= 0 {
			text = text[:j] + " …"
		}
		out = append(out, clip(fmt.Sprintf("%s[%s r%d %s] %s", mark, it.State, it.Revision, it.ID, SanitizeLine(text)), width))
	}
	return out
}

// ChipHelp is the notice a selected chip shows.
const ChipHelp = "queued item: Del cancels, Tab edits, ↑/↓ selects, ^P resumes the queue"
