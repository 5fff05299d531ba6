package terminal

import (
	"fmt"
	"strings"
)

// Status is what the status line shows. Every field is sanitized as one
// line (LF shows as ^J), so the status line stays one line whatever the
// controller or engine reported.
type Status struct {
	Conversation string
	// Controller is true when this connection holds control.
	Controller bool
	Generation uint64
	Engine     string
	Binding    string
	// Replay is the advertised replay window, e.g. "seq 12-4107", or "".
	Replay string
	// Scroll says where the viewport stands when it does not follow the
	// end, e.g. "lines 1-35 of 120", or "".
	Scroll string
	// Draft says that the composer keeps a draft (Ctrl-Y restores it).
	Draft bool
	// Notice is the composer's notice or a request outcome; it comes
	// last, so a narrow screen cuts it first.
	Notice string
}

// Line renders the status to one line of at most width cells. When the
// whole line does not fit, whole parts are left out, the least needed
// first (the replay window, the engine state, the generation, the scroll
// position), then the binding is cut (its admission reason can be long),
// before anything else is: a part cut mid-word (the draft hint shown as
// "dra…" at 100 columns) tells nothing, and one left out shows again on a
// wider screen. The conversation, the mode and the draft hint, which
// names its key, always stay; what still does not fit is cut at the end.
// The notice, last, is cut first and never makes a part leave.
func (s Status) Line(width int) string {
	mode := "observer"
	if s.Controller {
		mode = "controller"
	}
	// drop is the order parts are left out in, 0 for never.
	type part struct {
		text string
		drop int
	}
	const binding = -1 // cut to the room left, not left out
	parts := []part{{s.Conversation, 0}, {mode, 0}, {fmt.Sprintf("gen %d", s.Generation), 3}}
	if s.Engine != "" {
		parts = append(parts, part{"engine " + s.Engine, 2})
	}
	if s.Binding != "" {
		parts = append(parts, part{"binding " + s.Binding, binding})
	}
	if s.Replay != "" {
		parts = append(parts, part{"replay " + s.Replay, 1})
	}
	if s.Scroll != "" {
		parts = append(parts, part{s.Scroll, 4})
	}
	if s.Draft {
		parts = append(parts, part{"draft kept (" + DraftKey + ")", 0})
	}
	for i := range parts {
		parts[i].text = clip(parts[i].text, 0) // sanitized, so Width counts what shows
	}
	join := func(drop int) string {
		var kept []string
		for _, p := range parts {
			if p.drop <= 0 || p.drop > drop {
				kept = append(kept, p.text)
			}
		}
		return strings.Join(kept, " | ")
	}
	line := join(0)
	for drop := 1; drop <= 4 && width > 0 && Width(line) > width; drop++ {
		line = join(drop)
	}
	if over := Width(line) - width; width > 0 && over > 0 {
		// The binding's state reads in a few cells; its reason can wait
		// for a wider screen.
		for i, p := range parts {
			if p.drop == binding && Width(p.text)-over >= len("binding stopped…") {
				parts[i].text = clip(p.text, Width(p.text)-over)
			}
		}
		line = join(4)
	}
	if s.Notice != "" {
		line += " | " + s.Notice
	}
	return clip(line, width)
}
