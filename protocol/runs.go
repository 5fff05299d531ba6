package protocol

import (
	"fmt"
	"iter"
)

// RunsSince is the first protocol in which an event may carry a run of
// deltas (Event.Texts). A server sends runs only where a reader fell
// behind by more than one delta of a block: the deltas it would have
// written one line each go out as one line, each delta still its own seq
// and fragment, none merged into another.
const RunsSince = 2

// IsRun reports whether e carries a run of deltas.
func (e *Event) IsRun() bool { return e.Texts != nil }

// Last returns the seq of the last event e stands for: of its last delta
// for a run, e.Seq otherwise.
func (e *Event) Last() uint64 {
	if n := len(e.Texts); n > 0 {
		return e.Seq + uint64(n) - 1
	}
	return e.Seq
}

// Deltas yields the events e stands for, in order: each delta of a run as
// the single event the server would have written for it, e itself
// otherwise.
func (e Event) Deltas() iter.Seq[Event] {
	return func(yield func(Event) bool) {
		if e.Texts == nil {
			yield(e)
			return
		}
		texts := e.Texts
		e.Texts = nil
		for i, t := range texts {
			d := e
			d.Seq, d.Text = e.Seq+uint64(i), t
			if e.Fragment != nil {
				d.Fragment = Ordinal(*e.Fragment + i)
			}
			if !yield(d) {
				return
			}
		}
	}
}

// RunDelta reports whether e, its text aside, is a delta a run may hold:
// a text or thinking delta appended to its block at its fragment, not
// the block's last, not cut, carrying nothing else. The controller joins
// only such deltas (controller/runs.go), and CheckRun refuses a run of
// any other.
func (e *Event) RunDelta() bool {
	return (e.Kind == EventTextDelta || e.Kind == EventThinkingDelta) && e.UpdateMode == UpdateAppend &&
		e.Block != nil && e.Fragment != nil && !e.LastFragment && !e.Truncated && e.Tool == nil && e.Content == nil &&
		e.Part == nil && !e.LastPart && e.StopReason == "" && e.Reason == "" && e.Native == "" && e.Dropped == 0
}

// CheckRun says whether a run is one the protocol allows: text or
// thinking deltas of one block, appended, each its own fragment, none
// closing the block, no Text beside them and seqs within the safe
// integer range. An event that is not a run passes.
func CheckRun(e *Event) error {
	switch {
	case e.Texts == nil:
		return nil
	case e.Kind != EventTextDelta && e.Kind != EventThinkingDelta:
		return fmt.Errorf("a %s event carries texts: only text and thinking deltas come in runs", e.Kind)
	case len(e.Texts) == 0:
		return fmt.Errorf("a run of no deltas (seq %d)", e.Seq)
	case e.Text != "" || !e.RunDelta():
		return fmt.Errorf("a run (seq %d) carries what no delta of one does (text, a closing fragment, a cut, a tool, content, a part, a stop reason, a reason, a native type, dropped events), or lacks its block, fragment or append mode", e.Seq)
	case e.Seq == 0 || e.Last() > maxSafeInteger || e.Last() < e.Seq:
		return fmt.Errorf("a run's seqs (from %d, %d deltas) leave the safe integer range", e.Seq, len(e.Texts))
	case *e.Fragment < 0 || uint64(*e.Fragment)+uint64(len(e.Texts))-1 > maxSafeInteger:
		return fmt.Errorf("a run's fragments (from %d, %d deltas) leave the safe integer range", *e.Fragment, len(e.Texts))
	}
	return nil
}
