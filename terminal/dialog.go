package terminal

import "strings"

// Dialog is a confirmation the terminal asks for itself (force stop,
// recover): a title, the facts of what will happen (one per row, e.g. the
// stop target, execution, scope and members) and the question. Engine or
// controller text in it is sanitized with LF shown as ^J, so a value
// cannot add or forge rows: a fact too long for the width wraps onto
// continuation lines indented past its label (nothing of what will be
// stopped is cut), and the title and question are clipped to one line.
type Dialog struct {
	Title    string
	Facts    [][2]string // label, value
	Question string      // e.g. "force stop? y confirms, anything else cancels"
}

// Lines renders the dialog, each line at most width cells.
func (d Dialog) Lines(width int) []string {
	out := []string{clip("== "+d.Title+" ==", width)}
	for _, f := range d.Facts {
		head := "  " + SanitizeLine(f[0]) + ": "
		indent := Width(head) + 2
		if width > 0 && indent >= width/2 {
			// No room beside the label: the label alone, the value below.
			out = append(out, clip(head, width))
			head, indent = "    ", 4
		}
		pad := strings.Repeat(" ", indent)
		for i, w := range wrapLine(f[1], inner(width, indent)) {
			if i == 0 {
				out = append(out, head+w)
			} else {
				out = append(out, pad+w)
			}
		}
	}
	return append(out, clip(d.Question, width))
}
