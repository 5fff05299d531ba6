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

// Line renders the status to one line of at most width cells.
func (s Status) Line(width int) string {
	mode := "observer"
	if s.Controller {
		mode = "controller"
	}
	parts := []string{s.Conversation, mode, fmt.Sprintf("gen %d", s.Generation)}
	if s.Engine != "" {
		parts = append(parts, "engine "+s.Engine)
	}
	if s.Binding != "" {
		parts = append(parts, "binding "+s.Binding)
	}
	if s.Replay != "" {
		parts = append(parts, "replay "+s.Replay)
	}
	if s.Scroll != "" {
		parts = append(parts, s.Scroll)
	}
	if s.Draft {
		parts = append(parts, "draft kept ("+DraftKey+")")
	}
	if s.Notice != "" {
		parts = append(parts, s.Notice)
	}
	return clip(strings.Join(parts, " | "), width)
}
