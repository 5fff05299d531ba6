package controller

import (
	"cmp"
	"fmt"

	hclaude "github.com/mosaic-agents/mosaic/history/claude"
)

// announcements is what an execution's Claude Code engine said it wrote:
// the prompts it was sent and the frames it announced, by uuid
// (claude.Conn; engine/claude/announced.go).
type announcements interface {
	SentPrompt(id string) bool
	Announced(id string) (hclaude.Said, bool)
	Notified(said hclaude.Said) int
}

// announcedNothing is an engine that announced nothing yet: the launch's
// load check, before any prompt.
type announcedNothing struct{}

func (announcedNothing) SentPrompt(string) bool                { return false }
func (announcedNothing) Announced(string) (hclaude.Said, bool) { return hclaude.Said{}, false }
func (announcedNothing) Notified(hclaude.Said) int             { return 0 }

// noResponse is the assistant line the CLI writes, unannounced, when a
// resumed session's last message is a user's (a turn cut by a stop), as
// it sends the next prompt: measured, its line precedes the prompt's and
// is the prompt line's parent.
var noResponse = func() hclaude.Said {
	s, _ := hclaude.MessageSaid([]byte(`{"role":"assistant","content":[{"type":"text","text":"No response requested."}]}`))
	return s
}()

// transcriptVerdict is what one re-read of a Claude transcript shows
// against the read the controller last vouched for.
type transcriptVerdict struct {
	foreign string // another writer: what it did
	k8      string // the resumed session did not continue the pinned leaf
	// continued is set once the first prompt after a resume was found on
	// the pinned leaf's chain (the K8 check is done).
	continued bool
	leaf      string
	// unproven names the first line not proven the CLI's yet (nothing is
	// vouched for until it is); waiting says it waits for its stdout
	// frame, which the CLI writes before the line: the watch gives it a
	// few polls (the reader may be behind), then calls it foreign. A line
	// that waits for a descendant waits as long as none contradicts it.
	unproven, unprovenID string
	waiting              bool
	// pendingLine is the first line (1-based) of the read that is not
	// proven the CLI's by itself or by a proven line below it: a line
	// waiting for its frame, or an attachment only such a line, or
	// nothing yet, continues; 0 when every line is. The lines before it
	// are what a restart can hand over (Controller.Handover).
	pendingLine int
}

// checkTranscript compares now with prev, the read last vouched for, and
// proves every line appended since the CLI's (history/claude's package
// doc, "What the watch vouches for", has the measurements). Every main-chain entry of prev must still be there with
// the same parent (else the file was rewritten). Then, line by line:
//   - a prompt line (promptSource set) must carry a uuid this execution
//     sent (the CLI writes each prompt under the uuid the host gave it,
//     DIGEST §8, so any other is another writer's: a second `claude
//     --resume` of the session, by the user or by a tool) and say the
//     text it sent;
//   - a task notification line (a run_in_background task ended while the
//     CLI was idle) must say what a task_notification frame announced,
//     and no more lines of the transcript may say it than frames did (its
//     frame carries another uuid: a copy is told by the count);
//   - an assistant, other user or system line (sidechains too) must say
//     what the CLI announced on stdout under its uuid;
//   - an attachment, and the CLI's unannounced "No response requested.",
//     are the CLI's once a line proven so descends from them: the CLI's
//     lines name as parent only uuids it made, and a second line under
//     one of those refuses (hclaude: repeats entry). An attachment that a
//     proven line follows without descending from it never will be;
//   - a prompt_snapshot right after a proven line, its parent, is the
//     CLI's repeat of its snapshot if it says what the nearest snapshot
//     above it says (the CLI writes it after a process's first reply,
//     when nothing may follow before the next prompt);
//   - a line of no type the CLI was seen to write is refused.
//
// pinned, when not empty, is the leaf a resume pinned: the first new
// prompt of ours must descend from it (K8 after the first resumed
// prompt: the CLI writes nothing before it, so the load check could only
// read the file).
func checkTranscript(prev, now *hclaude.Transcript, said announcements, pinned string) transcriptVerdict {
	v := transcriptVerdict{leaf: now.DefaultLeaf()}
	for _, id := range prev.Order() {
		was, _ := prev.Entry(id)
		is, ok := now.Entry(id)
		if !ok || is.Parent != was.Parent {
			v.foreign = "entry " + id + " was removed or rewritten"
			return v
		}
	}
	was, _ := prev.Unlisted()
	if n, first := now.Unlisted(); n > was {
		v.foreign = first + " is of no kind Claude Code " + hclaude.Version + " was seen to write"
		return v
	}
	// The CLI writes a subagent's lines to <session>/subagents/, never
	// here (measured with the real CLI); and its
	// loader keeps one line per uuid, sidechain or not, the last: a
	// sidechain copy of a main-chain line under another parent rewires
	// what a resume loads (measured: the resumed request dropped every
	// message before it; TestSidechainLineIsForeign). So a
	// sidechain line here is another writer's, whatever it says.
	if side := now.Sidechain(); len(side) > len(prev.Sidechain()) {
		e := side[len(prev.Sidechain())]
		v.foreign = fmt.Sprintf("sidechain %s %s: Claude Code writes none to the session's transcript", e.Type, e.UUID)
		return v
	}
	order := now.Order()
	p := prover{prev: prev, now: now, proven: map[string]bool{}, limit: len(order)}
	// d proves as p does, but never through a line waiting for its frame
	// (pendingLine).
	d := prover{prev: prev, now: now, proven: map[string]bool{}, limit: len(order), waiting: map[string]bool{}}
	var open []hclaude.Entry // waiting for a proven descendant, in file order
	var notes map[hclaude.Said]int
	before := "" // the main-chain entry before e in file order
	for _, id := range order {
		e, _ := now.Entry(id)
		last := before
		before = id
		if _, old := prev.Entry(id); old {
			continue
		}
		switch {
		case e.Notification:
			n := said.Notified(e.Said)
			if n == 0 {
				// Its frame may not be read yet, as below.
				if v.unproven == "" {
					v.unproven, v.unprovenID, v.waiting = "task notification "+id+" was not announced by the engine", id, true
				}
				d.waiting[id] = true
				break
			}
			if notes == nil {
				notes = notifications(now)
			}
			if notes[e.Said] > n {
				v.foreign = fmt.Sprintf("task notification %s says what the engine announced %d times in %d lines: another writer copied it", id, n, notes[e.Said])
				return v
			}
			// Its words are predictable and its uuid no frame's: a copy
			// written before the CLI's line counts as the CLI's until
			// that line comes, so it proves nothing above it
			// (TestNotificationCopyProvesNothing): its parent must be
			// proven already.
			if !p.known(e.Parent) {
				v.foreign = fmt.Sprintf("task notification %s continues %s, which no line of the engine proved", id, e.Parent)
				return v
			}
			p.proven[e.UUID] = true
			if d.known(e.Parent) {
				d.proven[e.UUID] = true
			}
			goto checked
		case e.Prompt:
			if !said.SentPrompt(id) {
				v.foreign = "prompt " + id + " was written by another writer"
				return v
			}
			if got, _ := said.Announced(id); got != e.Said {
				v.foreign = "prompt " + id + " does not hold the text this execution sent"
				return v
			}
			if pinned != "" && !v.continued {
				if !now.Ancestor(pinned, id) {
					v.k8 = fmt.Sprintf("the first prompt after the resume (%s) does not continue the pinned leaf %s", id, pinned)
					return v
				}
				v.continued = true
			}
		case e.Type == "attachment":
			if e.Attachment == "prompt_snapshot" && e.Parent == last && p.known(last) && p.repeats(e) {
				if !d.known(last) || !d.repeats(e) {
					d.waiting[e.UUID] = true // proven only through a line waiting for its frame
				}
				break
			}
			open = append(open, e)
			continue
		default:
			got, ok := said.Announced(id)
			switch {
			case ok && got == hclaude.CutSaid(e.Type):
				// A frame too large for the adapter's framing: its uuid
				// alone. No writer but the CLI knows it before the CLI
				// writes its own line, and a second line under it is a
				// repeat, refused; what the watch cannot see is a
				// rewrite of that line in place before its next poll.
			case ok && got != e.Said:
				v.foreign = fmt.Sprintf("%s %s does not say what the engine announced under its uuid", e.Type, id)
				return v
			case !ok && e.Type == "assistant" && e.Said == noResponse:
				open = append(open, e)
				continue
			case !ok:
				// Its frame may not be read yet: it stands for the CLI's
				// until then, so what it descends from waits with it.
				if v.unproven == "" {
					v.unproven, v.unprovenID, v.waiting = fmt.Sprintf("%s %s was not announced by the engine", e.Type, id), id, true
				}
				d.waiting[id] = true
			}
		}
		p.descend(e)
		d.descend(e)
	checked:
		for _, o := range open {
			if !p.proven[o.UUID] {
				v.foreign = fmt.Sprintf("%s %s (%s) was written by another writer: the engine's lines after it do not continue it", o.Type, o.UUID, cmp.Or(o.Attachment, "no attachment"))
				return v
			}
		}
		open = open[:0]
	}
	if v.unproven == "" && len(open) > 0 {
		o := open[0]
		v.unproven, v.unprovenID = fmt.Sprintf("%s %s (%s) is not continued by a line of the engine yet", o.Type, o.UUID, cmp.Or(o.Attachment, "no attachment")), o.UUID
	}
	if v.unproven != "" {
		v.pendingLine = d.firstPending(order)
	}
	return v
}

// firstPending is the line of the first new entry in order that d did not
// prove (0 if none).
func (d *prover) firstPending(order []string) int {
	for _, id := range order {
		if d.known(id) {
			continue
		}
		if e, _ := d.now.Entry(id); e.Line > 0 {
			return e.Line
		}
	}
	return 0
}

// notifications counts t's task notification lines by what they say.
func notifications(t *hclaude.Transcript) map[hclaude.Said]int {
	n := map[hclaude.Said]int{}
	for _, id := range t.Order() {
		if e, _ := t.Entry(id); e.Notification {
			n[e.Said]++
		}
	}
	return n
}

// prover tracks which of now's new entries are proven the CLI's.
type prover struct {
	prev, now *hclaude.Transcript
	proven    map[string]bool
	limit     int // the entries now holds: no parent chain is longer
	// waiting are lines not proven yet whose proof descend must not pass
	// on (nil: descend passes through every line, as the check does).
	waiting map[string]bool
}

// known says id is vouched for (prev) or proven.
func (p *prover) known(id string) bool {
	_, old := p.prev.Entry(id)
	return old || p.proven[id]
}

// descend proves e and every new entry above it not proven yet: e's
// parent chain is the CLI's up to the vouched read.
func (p *prover) descend(e hclaude.Entry) {
	if p.waiting[e.UUID] {
		return
	}
	p.proven[e.UUID] = true
	for id := e.Parent; id != "" && !p.known(id) && !p.waiting[id]; {
		a, ok := p.now.Entry(id)
		if !ok {
			return
		}
		p.proven[id] = true
		id = a.Parent
	}
}

// repeats says snapshot e says what the nearest prompt_snapshot above it
// says, that one vouched for or proven.
func (p *prover) repeats(e hclaude.Entry) bool {
	for id, seen := e.Parent, 0; id != ""; seen++ {
		a, ok := p.now.Entry(id)
		if !ok || seen > p.limit {
			return false
		}
		if a.Attachment == "prompt_snapshot" {
			return p.known(id) && a.Said == e.Said && e.Said != hclaude.Said{}
		}
		id = a.Parent
	}
	return false
}
