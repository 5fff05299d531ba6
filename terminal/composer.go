package terminal

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/protocol"
)

// Control is what the client holds about who controls the conversation:
// the controller's connection identity ("" when there is none) and the
// controller generation. Any change of either is a control transfer.
type Control struct {
	Controller string
	Generation uint64
}

// Refusal is a local refusal of the composer: nothing was sent.
type Refusal struct {
	Code    string
	Message string
}

func (r *Refusal) Error() string { return r.Message }

// The composer's refusals.
var (
	// ErrNotController: the connection is an observer; the text is kept.
	ErrNotController = &Refusal{protocol.CodeNotController, "not admitted: you are an observer; Ctrl-T takes control"}
	// ErrEmpty: Enter on an empty composer sends nothing.
	ErrEmpty = &Refusal{"empty", "nothing to send"}
)

// OutcomeUnknown is what the terminal shows when a request's outcome is
// lost (the connection dropped before its receipt or refusal arrived).
const OutcomeUnknown = "outcome unknown, check the transcript"

// OutcomeKind says how a submitted request ended.
type OutcomeKind int

// Outcome kinds.
const (
	// Admitted: the controller admitted the prompt (a receipt came back).
	Admitted OutcomeKind = iota + 1
	// Refused: the controller refused it; Code is the refusal code.
	Refused
	// Lost: the outcome never arrived. Nothing is resent and no resend is
	// offered: the text was cleared at submit and the composer keeps no
	// copy of it.
	Lost
)

// Outcome is the result of a submitted request, reported by the caller.
type Outcome struct {
	Kind OutcomeKind
	Code string
}

// Composer is the local message buffer. It is empty at start, cleared
// after each submit and whenever control changes, and it submits only
// while its connection is the controller. The zero value is ready to use.
//
// What a control change clears is kept as the draft, which only
// RestoreDraft (Ctrl-Y) puts back: taking control does not throw away
// what an observer typed, and nothing typed before a transfer is ever
// sent by it or prefixes the next submit unasked (S4).
type Composer struct {
	text    string
	draft   string
	control Control
	known   bool
	notice  string
}

// DraftKey names the key that restores the draft, for notices and the
// legend.
const DraftKey = "Ctrl-Y"

// Text returns the buffer.
func (c *Composer) Text() string { return c.text }

// Notice returns the composer's last notice (a refusal, an outcome, a
// cleared buffer), one line, or "".
func (c *Composer) Notice() string { return c.notice }

// Insert appends typed or pasted text literally: control characters,
// ESC, paste markers, U+2028 all stay. Invalid UTF-8 bytes become U+FFFD,
// one per byte (as encoding/json would send them), so the buffer shown is
// exactly the text that will be sent.
func (c *Composer) Insert(s string) {
	if !utf8.ValidString(s) {
		var b strings.Builder
		for i := 0; i < len(s); {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				b.WriteRune(utf8.RuneError)
			} else {
				b.WriteString(s[i : i+n])
			}
			i += n
		}
		s = b.String()
	}
	c.text += s
}

// Newline appends a line feed (Ctrl-J, Alt-Enter).
func (c *Composer) Newline() { c.text += "\n" }

// Backspace removes the last character.
func (c *Composer) Backspace() {
	_, n := utf8.DecodeLastRuneInString(c.text)
	c.text = c.text[:len(c.text)-n]
}

// Edit applies an editing key (text, paste, newline, backspace) and
// reports whether k was one. Enter is not an edit: the caller calls
// Submit. A paste is inserted and never submits.
func (c *Composer) Edit(k Key) bool {
	switch k.Kind {
	case KeyText, KeyPaste:
		c.Insert(k.Text)
	case KeyNewline:
		c.Newline()
	case KeyBackspace:
		c.Backspace()
	default:
		return false
	}
	return true
}

// SetControl records the control the client now holds and clears the
// buffer when it differs from the last one recorded (S4), including the
// first time (control was unknown). It reports whether it cleared text.
func (c *Composer) SetControl(ctl Control) bool {
	if c.known && ctl == c.control {
		return false
	}
	c.control, c.known = ctl, true
	if c.text == "" {
		return false
	}
	c.keepDraft()
	c.text = ""
	c.notice = fmt.Sprintf("control changed (generation %d): composer cleared; %s restores your text", ctl.Generation, DraftKey)
	return true
}

// keepDraft keeps the buffer as the draft, after an older draft not yet
// restored, so no text is lost over several transfers.
func (c *Composer) keepDraft() {
	if c.draft != "" {
		c.draft += "\n"
	}
	c.draft += c.text
}

// Draft returns the text the last control changes cleared and no
// RestoreDraft has put back yet.
func (c *Composer) Draft() string { return c.draft }

// RestoreDraft appends the draft to the buffer (which is usually empty)
// and forgets it; it reports whether there was one. The text is only
// shown: Enter sends it, as the controller, like anything typed.
func (c *Composer) RestoreDraft() bool {
	if c.draft == "" {
		c.notice = "no draft to restore"
		return false
	}
	c.text += c.draft
	c.draft = ""
	c.notice = "draft restored: Enter sends it"
	return true
}

// Submit takes the composer at Enter. As the controller it returns the
// exact text to send and clears the buffer; otherwise it returns
// ErrNotController and keeps the text (S5). An empty buffer returns
// ErrEmpty. A text the text policy refuses is refused here, with the
// controller's code and message, and kept: sent, the controller would
// refuse it after the buffer was cleared, and the text would be gone.
func (c *Composer) Submit(isController bool) (string, error) {
	if c.text == "" {
		c.notice = ErrEmpty.Message
		return "", ErrEmpty
	}
	if !isController {
		c.notice = ErrNotController.Message
		return "", ErrNotController
	}
	var policy *protocol.Refusal
	if errors.As(engine.CheckText(c.text), &policy) {
		c.notice = policy.Message
		return "", &Refusal{policy.Code, policy.Message}
	}
	text := c.text
	c.text = ""
	c.notice = ""
	return text, nil
}

// Settle records how the last submitted request ended, for the notice.
func (c *Composer) Settle(o Outcome) {
	switch o.Kind {
	case Admitted:
		c.notice = "admitted"
	case Refused:
		c.notice = "refused: " + o.Code
	default:
		c.notice = OutcomeUnknown
	}
}

// Lines renders the buffer to lines of width cells: "> " then the text,
// sanitized like a message body (LF is a line break, ESC shows as ^[).
func (c *Composer) Lines(width int) []string {
	var out []string
	for i, l := range strings.Split(c.text, "\n") {
		p := "  "
		if i == 0 {
			p = "> "
		}
		for _, w := range wrapLine(l, inner(width, 2)) {
			out = append(out, p+w)
			p = "  "
		}
	}
	return out
}

// Handle applies one key the way the screen loop does: an edit changes the
// buffer, Enter submits (see Submit). send is the text to send when ok;
// err is a refusal from Submit; any other key does nothing here (the
// caller handles control, scrolling and quitting).
func (c *Composer) Handle(k Key, isController bool) (send string, ok bool, err error) {
	if c.Edit(k) || k.Kind != KeyEnter {
		return "", false, nil
	}
	send, err = c.Submit(isController)
	return send, err == nil, err
}
