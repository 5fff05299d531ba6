package terminal

import (
	"fmt"
	"strconv"

	"github.com/mosaic-agents/mosaic/protocol"
)

// ApprovalView is a native decision as attach shows it: the exact title,
// message and choices, each made inert by Dialog (a label's newline is
// ^J, a bidi control <U+202E>: a label cannot forge another row), and the
// keys that answer it. Only a controller's view answers; an observer's
// says who may.
type ApprovalView struct {
	Approval protocol.Approval
	// CanAnswer: this connection controls and the decision is pending.
	CanAnswer bool
}

// maxKeyedChoices is how many choices a digit key can pick (1-9); a
// longer select is answered with `mosaicctl approve --choice`.
const maxKeyedChoices = 9

// Dialog lays the view out: one fact per field and per choice, numbered
// as the keys that pick them.
func (v ApprovalView) Dialog() Dialog {
	a := v.Approval
	d := Dialog{Title: fmt.Sprintf("native %s %s (decision %s): %s", a.Form, a.ID, a.Decision, a.State)}
	d.Facts = append(d.Facts, [2]string{"title", a.Title})
	if a.Message != "" {
		d.Facts = append(d.Facts, [2]string{"message", a.Message})
	}
	for i, c := range a.Choices {
		d.Facts = append(d.Facts, [2]string{strconv.Itoa(i + 1), c})
	}
	if a.Deadline != "" {
		d.Facts = append(d.Facts, [2]string{"deadline", a.Deadline})
	}
	if a.Reason != "" {
		d.Facts = append(d.Facts, [2]string{"reason", a.Reason})
	}
	switch {
	case v.CanAnswer && len(a.Choices) > maxKeyedChoices:
		d.Question = fmt.Sprintf("%d choices: answer with mosaicctl approve --choice LABEL; Esc hides", len(a.Choices))
	case v.CanAnswer && a.Form == protocol.FormConfirm:
		d.Question = "1 or y answers true, 2 or n answers false; Esc hides it (it stays pending)"
	case v.CanAnswer:
		d.Question = fmt.Sprintf("1-%d answers with exactly that choice; Esc hides it (it stays pending)", len(a.Choices))
	case a.State == protocol.ApprovalPending:
		d.Question = fmt.Sprintf("read-only: only the controller (%s) may answer; Esc hides", a.Controller)
	default:
		d.Question = "nobody can answer it; Esc hides"
	}
	return d
}

// choice returns the choice key k picks, if it picks one.
func (v ApprovalView) choice(k Key) (string, bool) {
	a := v.Approval
	if !v.CanAnswer || k.Kind != KeyText {
		return "", false
	}
	if a.Form == protocol.FormConfirm && len(a.Choices) == 2 {
		switch k.Text {
		case "y", "Y":
			return a.Choices[0], true
		case "n", "N":
			return a.Choices[1], true
		}
	}
	n, err := strconv.Atoi(k.Text)
	if err != nil || n < 1 || n > len(a.Choices) || n > maxKeyedChoices {
		return "", false
	}
	return a.Choices[n-1], true
}
