package terminal

import (
	"fmt"
	"strings"
)

// Action is what a key asks the screen loop to do beyond the screen's own
// state (which Handle has already changed).
type Action int

// The actions Handle returns.
const (
	// ActNone: nothing to send; redraw.
	ActNone Action = iota
	// ActSend: send the text Handle returned as a prompt.
	ActSend
	// ActTakeControl, ActInterrupt, ActReconnect, ActQuit: Ctrl-T, Ctrl-G,
	// Ctrl-O, Ctrl-C/Ctrl-D.
	ActTakeControl
	ActInterrupt
	ActReconnect
	ActQuit
	// ActForceStop and ActRecover ask for a confirmation from the
	// controller; the loop opens a Dialog with what it says.
	ActForceStop
	ActRecover
	// ActConfirm and ActDecline answer the open dialog (which Handle has
	// closed).
	ActConfirm
	ActDecline
	// ActCancelQueued and ActEditQueued act on the chip Chips.Selected
	// and Chips.Editing name (the edit's text is Handle's); ActResumeQueue
	// resumes a paused queue.
	ActCancelQueued
	ActEditQueued
	ActResumeQueue
	// ActOlder: PageUp reached the first line of the transcript (or found
	// it there): read the history page before the oldest one shown.
	ActOlder
	// ActApprove: answer the shown approval with the choice Handle
	// returned (exactly one of its native choices).
	ActApprove
)

// MinComposerRows and the composer's share of the height: the composer
// shows at most a third of the screen (its last lines, where typing
// happens), and at least one row.
const MinComposerRows = 1

// Legend is the key legend that ? shows on an empty composer, most used
// first. It takes as many notice rows as the width needs (legendLines),
// breaking only between keys, so each key reads whole at 80 columns. A
// second ? types a ?.
const Legend = "keys: ^T take control, ^Y restore draft, ^G interrupt, ^X stop, ^R recover, ^J newline, ^O reconnect, PgUp/PgDn, ↑/↓ queued items, ^P resume queue, ^C quit"

// Screen is the attach screen without I/O: the transcript viewport, the
// status line, the composer and a dialog, and what each key does to them.
// The loop feeds it keys and records, asks Render for a frame and writes
// it. The zero value is ready to use; set Transcript before rendering.
type Screen struct {
	// Transcript is the view model shown in the viewport (nil: empty).
	Transcript *Transcript
	// Status is the status line's content; Render fills its Notice and
	// Scroll.
	Status   Status
	Composer Composer
	// Chips are the queue's waiting items under the composer.
	Chips Chips

	dialog *Dialog
	// approval is the native decision shown in the composer's place; a
	// confirmation dialog of the screen's own goes over it.
	approval *ApprovalView
	notice   string
	// legend is set while the notice shows the key legend: a second ?
	// then types a ? (a prompt may start with one).
	legend bool

	// Scrolling: top is the first transcript line shown while scrolled;
	// otherwise the viewport follows the end. lines and rows are the
	// transcript length and viewport height at the last Render, which
	// PageUp/PageDown move by; head and width are the transcript's
	// HeadLines and the width then, by which older history prepended
	// since moves top along.
	scrolled    bool
	top         int
	lines, rows int
	head, width int
}

// Frame is one rendered screen: exactly the requested number of lines,
// each at most the width in cells, and where the cursor goes (0-based).
type Frame struct {
	Lines     []string
	CursorRow int
	CursorCol int
	// StatusRow is the status line's row, -1 when the screen has no room
	// for it.
	StatusRow int
}

// Notice returns the notice the status line shows.
func (s *Screen) Notice() string { return s.notice }

// SetNotice replaces the notice (an outcome, a refusal, a broadcast).
func (s *Screen) SetNotice(n string) { s.notice = n }

// Dialog returns the open dialog, or nil.
func (s *Screen) Dialog() *Dialog { return s.dialog }

// OpenDialog shows d until it is answered: while it is open every key
// goes to it.
func (s *Screen) OpenDialog(d Dialog) { s.dialog = &d }

// CloseDialog closes the dialog without an answer (its confirmation is
// gone, e.g. the connection ended).
func (s *Screen) CloseDialog() { s.dialog = nil }

// Approval returns the approval shown, or nil.
func (s *Screen) Approval() *ApprovalView { return s.approval }

// ShowApproval shows v in the composer's place until it is hidden: while
// it shows, keys go to it (digits or y/n answer a controller's, Esc hides
// it), never to the composer.
func (s *Screen) ShowApproval(v ApprovalView) { s.approval = &v }

// HideApproval stops showing the approval.
func (s *Screen) HideApproval() { s.approval = nil }

// SetControl records who controls the conversation now; the composer is
// cleared when that changed (S4), and the status shows this connection's
// mode.
func (s *Screen) SetControl(ctl Control, isController bool) {
	s.Status.Controller = isController
	if s.Composer.SetControl(ctl) {
		s.notice = s.Composer.Notice()
	}
}

// Settle records how a submitted prompt ended.
func (s *Screen) Settle(o Outcome) {
	s.Composer.Settle(o)
	s.notice = s.Composer.Notice()
}

// Handle applies one key and returns what the loop must do: for ActSend
// the text to send, exactly as composed.
func (s *Screen) Handle(k Key) (Action, string) {
	if s.dialog != nil {
		return s.answer(k), ""
	}
	if s.approval != nil && !actionKey(k) {
		return s.approve(k)
	}
	legend := s.legend
	s.legend = false
	if legend && s.notice == Legend {
		// The legend answers one ?: the next key puts it away and gives
		// its rows back to the transcript.
		s.notice = ""
	}
	switch k.Kind {
	case KeyText:
		if k.Text == "?" && s.Composer.Text() == "" && !legend {
			s.notice, s.legend = Legend, true
			return ActNone, ""
		}
	case KeyRestoreDraft:
		s.Composer.RestoreDraft()
		s.notice = s.Composer.Notice()
		return ActNone, ""
	case KeyQuit:
		return ActQuit, ""
	case KeyTakeControl:
		return ActTakeControl, ""
	case KeyInterrupt:
		return ActInterrupt, ""
	case KeyReconnect:
		return ActReconnect, ""
	case KeyForceStop:
		return ActForceStop, ""
	case KeyRecover:
		return ActRecover, ""
	case KeyPageUp:
		if s.pageUp() {
			return ActOlder, ""
		}
		return ActNone, ""
	case KeyPageDown:
		s.pageDown()
		return ActNone, ""
	case KeyResumeQueue:
		return ActResumeQueue, ""
	}
	if act, ok := s.chipKey(k); ok {
		return act, ""
	}
	send, ok, err := s.Composer.Handle(k, s.Status.Controller)
	switch {
	case ok && s.Chips.edit != nil:
		s.notice = "saving the edit…"
		return ActEditQueued, send
	case ok:
		s.notice = "sending…"
		return ActSend, send
	case err != nil:
		s.notice = s.Composer.Notice()
	}
	return ActNone, ""
}

// chipKey applies the keys that act on the queue's chips: with an empty
// composer, ↑/↓ select a chip; on a selected chip Del cancels it and Tab
// puts its text in the composer for an edit, which Enter saves and Esc
// leaves. ok is false for every other key.
func (s *Screen) chipKey(k Key) (Action, bool) {
	c := &s.Chips
	if c.edit != nil {
		if k.Kind == KeyEscape {
			c.edit = nil
			s.Composer.text = ""
			s.notice = "edit left; the item is unchanged"
			return ActNone, true
		}
		return ActNone, false
	}
	if s.Composer.Text() != "" {
		return ActNone, false
	}
	_, selected := c.Selected()
	switch {
	case k.Kind == KeyUp || k.Kind == KeyDown:
		if len(c.Items) == 0 {
			return ActNone, false
		}
		c.move(k.Kind == KeyUp)
		s.notice = ""
		if _, on := c.Selected(); on {
			s.notice = ChipHelp
		}
		return ActNone, true
	case selected && k.Kind == KeyBackspace:
		return ActCancelQueued, true
	case selected && k.Kind == KeyText && k.Text == "\t":
		chip, _ := c.Selected()
		c.edit = &chip
		s.Composer.text = chip.Text
		s.notice = "editing " + chip.ID + ": Enter saves, Esc leaves"
		return ActNone, true
	}
	return ActNone, false
}

// EditDone ends an edit after its outcome arrived.
func (s *Screen) EditDone() { s.Chips.edit = nil }

// answer takes a key while the dialog is open: y or Y confirms; n, N,
// Esc, Enter and Ctrl-C/Ctrl-D decline (the default is no); anything else
// is ignored, a paste included.
func (s *Screen) answer(k Key) Action {
	switch {
	case k.Kind == KeyText && (k.Text == "y" || k.Text == "Y"):
		s.dialog = nil
		return ActConfirm
	case k.Kind == KeyText && (k.Text == "n" || k.Text == "N"),
		k.Kind == KeyEscape, k.Kind == KeyEnter, k.Kind == KeyQuit:
		s.dialog = nil
		return ActDecline
	}
	return ActNone
}

// actionKey reports whether k is a control key that acts while an
// approval shows (take control, interrupt, stop, recover, reconnect,
// scroll, quit); typing keys go to the approval, never to the composer.
func actionKey(k Key) bool {
	switch k.Kind {
	case KeyQuit, KeyTakeControl, KeyInterrupt, KeyReconnect, KeyForceStop, KeyRecover, KeyPageUp, KeyPageDown:
		return true
	}
	return false
}

// approve takes a typing key while an approval shows: a choice key
// answers it (the loop sends it; the approval stays until the controller
// says it is resolved), Esc hides it, anything else does nothing.
func (s *Screen) approve(k Key) (Action, string) {
	if k.Kind == KeyEscape {
		s.notice = fmt.Sprintf("approval %s hidden; it stays %s (mosaicctl approve lists it)", s.approval.Approval.ID, s.approval.Approval.State)
		s.approval = nil
		return ActNone, ""
	}
	if c, ok := s.approval.choice(k); ok {
		s.notice = "answering…"
		return ActApprove, c
	}
	return ActNone, ""
}

// step is how far a page key moves: the viewport less one line, so one
// line of context stays.
func (s *Screen) step() int { return max(s.rows-1, 1) }

func (s *Screen) end() int { return max(s.lines-s.rows, 0) }

// pageUp scrolls a page up and reports whether the viewport now shows
// the transcript's first line.
func (s *Screen) pageUp() bool {
	if s.end() == 0 {
		return true
	}
	if !s.scrolled {
		s.top = s.end()
	}
	s.top = max(s.top-s.step(), 0)
	s.scrolled = true
	return s.top == 0
}

func (s *Screen) pageDown() {
	if !s.scrolled {
		return
	}
	s.top += s.step()
	if s.top >= s.end() {
		s.scrolled = false
	}
}

// keep moves the viewport down by what older history added above it
// since the last Render (head grew at the same width), so the lines the
// reader was looking at stay where they were. A viewport that showed the
// whole transcript keeps its first line at the top, when enough follows
// it to fill the viewport; one that follows the end of a longer
// transcript keeps following it.
func (s *Screen) keep(head, lines, width int) {
	grew := head - s.head
	if grew <= 0 || s.head == 0 || width != s.width {
		return
	}
	switch {
	case s.scrolled:
		s.top += grew
	case s.end() == 0 && grew < lines-s.rows:
		s.scrolled, s.top = true, grew
	}
}

// Render lays the screen out in height lines of at most width cells:
// the transcript viewport on top (its end, unless scrolled), the status
// line, the notice line (outcomes, refusals, broadcasts; one line,
// sanitized; the key legend takes the rows it needs), then the composer (its last lines, at most a third of the
// height) or the open dialog in its place.
func (s *Screen) Render(width, height int) Frame {
	width, height = max(width, 1), max(height, 1)
	var bottom []string
	curRow, curCol := -1, 0
	var over *Dialog
	switch {
	case s.dialog != nil:
		over = s.dialog
	case s.approval != nil:
		d := s.approval.Dialog()
		over = &d
	}
	if over != nil {
		bottom = over.Lines(width)
		if n := height - 1; len(bottom) > n {
			bottom = bottom[len(bottom)-max(n, 0):]
		}
		if len(bottom) > 0 {
			curRow, curCol = len(bottom)-1, Width(bottom[len(bottom)-1])
		}
	} else {
		bottom = append(s.Chips.Lines(width), s.Composer.Lines(width)...)
		if n := max(height/3, MinComposerRows); len(bottom) > n {
			hidden := len(bottom) - n
			bottom = bottom[hidden:]
			if n > 1 {
				bottom[0] = clip(fmt.Sprintf("  … %d more lines", hidden+1), width)
			}
		}
		curRow, curCol = len(bottom)-1, Width(bottom[len(bottom)-1])
	}
	notice := []string{clip(s.notice, width)}
	if s.notice == Legend {
		// The rows it needs come from the transcript, never from the
		// status line or the composer.
		notice = legendLines(width)
		notice = notice[:max(min(len(notice), height-1-len(bottom)), 1)]
	}
	rows := max(height-1-len(notice)-len(bottom), 0)
	// Only the viewport's lines are taken from the transcript; the items
	// keep their wrapped lines between frames, so a frame costs what it
	// shows, not the length of the conversation.
	total, head := 0, 0
	if s.Transcript != nil {
		total = s.Transcript.count(width)
		head = s.Transcript.HeadLines(width)
	}
	s.keep(head, total, width)
	s.lines, s.rows, s.head, s.width = total, rows, head, width
	top := s.end()
	if s.scrolled {
		s.top = min(s.top, s.end())
		top = s.top
		s.scrolled = s.end() > 0 // nothing to scroll: follow the end
	}
	st := s.Status
	st.Notice = "" // the notice has a row of its own
	// The notice of the change that kept a draft is soon replaced (by
	// the takeover's own outcome, a broadcast): the status line keeps
	// saying that there is one.
	st.Draft = s.Composer.Draft() != ""
	if s.scrolled {
		st.Scroll = fmt.Sprintf("lines %d-%d of %d (PageDown)", top+1, min(top+rows, total), total)
	}
	out := make([]string, 0, height)
	if s.Transcript != nil {
		out = s.Transcript.window(out, width, top, rows)
	}
	for i := range out {
		out[i] = clip(out[i], width)
	}
	for len(out) < rows {
		out = append(out, "")
	}
	statusRow := -1
	if len(out) < height {
		statusRow = len(out)
		out = append(out, st.Line(width))
	}
	for _, l := range notice {
		if len(out) < height {
			out = append(out, l)
		}
	}
	base := len(out)
	for _, l := range bottom {
		if len(out) == height {
			break
		}
		out = append(out, clip(l, width))
	}
	for len(out) < height {
		out = append(out, "")
	}
	return Frame{Lines: out, CursorRow: min(base+max(curRow, 0), height-1), CursorCol: min(curCol, width-1), StatusRow: statusRow}
}

// legendLines lays Legend out in lines of at most width cells, as many
// keys on a line as fit, each line but the last ending in its comma: a
// key is cut only when it is wider than the screen by itself.
func legendLines(width int) []string {
	var out []string
	line := ""
	for _, key := range strings.SplitAfter(Legend, ", ") {
		key = strings.TrimSuffix(key, " ")
		switch {
		case line == "":
			line = key
		case Width(line)+1+Width(key) <= width:
			line += " " + key
		default:
			out = append(out, clip(line, width))
			line = key
		}
	}
	return append(out, clip(line, width))
}

// Plain joins a frame's lines, for tests and logs.
func (f Frame) Plain() string { return strings.Join(f.Lines, "\n") }
