package terminal

// Dialog is a confirmation the terminal asks for itself (force stop,
// recover): a title, the facts of what will happen (one per row, e.g. the
// stop target, execution, scope and members) and the question. Every row
// is one line: engine or controller text in it is sanitized with LF shown
// as ^J, so a value cannot add or forge rows.
type Dialog struct {
	Title    string
	Facts    [][2]string // label, value
	Question string      // e.g. "force stop? type yes to confirm"
}

// Lines renders the dialog, each line at most width cells.
func (d Dialog) Lines(width int) []string {
	out := []string{clip("== "+d.Title+" ==", width)}
	for _, f := range d.Facts {
		out = append(out, clip("  "+f[0]+": "+f[1], width))
	}
	return append(out, clip(d.Question, width))
}
