package controller

import (
	"context"
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"time"

	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/engine/pi"
	"github.com/mosaic-agents/mosaic/history"
	"github.com/mosaic-agents/mosaic/protocol"
)

// watchSession detects a foreign writer (W10): an entry appended to the
// bound session file whose id the engine does not hold in its own session
// was written by someone else (another `pi --session` on the same file),
// and so was a file that no longer continues the one pinned (replaced,
// shortened or rewritten: the history reader's source-replaced).
// Admission closes, the binding becomes uncertain and clients get a
// reconcile marker. The controller itself only ever reads the file:
// history.Follow parses only what was appended since the last check.
func (c *Controller) watchSession(x *execution, prev *history.Snapshot) {
	path := c.cfg.Conversation.Session
	if prev != nil {
		x.checked.Store(prev.Size())
	}
	// The file the engine was launched on (or re-attached to) is vouched
	// for by the load check; nil is an empty file, which Pi gives its
	// header at start.
	x.vouched.Store(fileState(ofSnap(prev)))
	var lastSize int64 = -1
	var lastMod, lastChange time.Time
	var unfinished int // polls that found the header still being written
	var skipped int    // polls in a row that found size and times unchanged
	every := recheckPolls
	if c.test.recheckPolls > 0 {
		every = c.test.recheckPolls
	}
	t := time.NewTicker(c.cfg.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-c.pollNow: // a shutdown waits for this poll (awaitChecked)
		}
		c.mu.Lock()
		current := c.st.exec == x && !x.exited
		c.mu.Unlock()
		if !current {
			return
		}
		// Lstat, not Stat: a symlink swapped in or a removed file must
		// reach Follow, which refuses both (a file not written yet is a
		// new conversation to Follow, not an error).
		fi, err := os.Lstat(path)
		if err == nil && fi.Size() == lastSize && fi.ModTime().Equal(lastMod) && changeTime(fi).Equal(lastChange) {
			if skipped++; skipped < every {
				continue
			}
		}
		skipped = 0
		snap, err := history.Follow(path, prev, history.Options{})
		if beingCreated(err, prev) && unfinished < halfLineTicks {
			unfinished++
			continue
		}
		if code := protocol.CodeOf(err); code != "" {
			// source-replaced (rewritten, shortened), unsafe-path (a
			// symlink, not a regular file, removed, swapped), too-large,
			// unreadable: either someone else changed the file or it can
			// no longer be checked; both mean nobody vouches for it.
			c.foreign(x, "the session file can no longer be vouched for ("+code+"): "+err.Error(), "")
			return
		}
		if err != nil {
			continue
		}
		if !snap.New() {
			if engine := c.sawWritten(x, snap.SessionID()); engine != "" {
				c.foreign(x, "the session file names session "+snap.SessionID()+", not the engine's "+engine+": another writer made it", "")
				return
			}
		}
		fresh := snap.Appended()
		if len(fresh) > 0 {
			// Ask the engine after reading the file: Pi adds an entry to
			// its session before it appends it to the file.
			ours, err := engineEntries(x, prev, snap.Size())
			if err != nil {
				continue // checked again next tick: prev and lastSize stay
			}
			if id, what := unvouched(snap, ours); id != "" {
				c.foreign(x, what, id)
				return
			}
			// A leaf id Pi would not write is never pinned
			// (readSessionHead): the binding keeps naming the last one.
			if leaf := snap.LeafID(); history.PlainID(leaf) {
				c.follow(x, leaf)
			}
		}
		prev, lastSize, lastMod, lastChange = snap, -1, time.Time{}, time.Time{}
		x.checked.Store(snap.Size())
		x.vouched.Store(fileState(snap))
		if fi != nil {
			lastSize, lastMod, lastChange = fi.Size(), fi.ModTime(), changeTime(fi)
		}
	}
}

// recheckPolls bounds the polls in a row that trust an unchanged size,
// modification and change time: every recheckPolls-th reads the file
// again. A write(2) after the watch's lstat always moves the change time
// (since Linux 6.13 a queried ctime makes the next stamp a fine-grained,
// distinct one on ext4, xfs, btrfs and tmpfs), but a store through a
// shared writable mapping stamps only at the fault that makes its page
// writable: a tool that dirtied a page of the session file (writing back
// its own bytes) then rewrites what it likes there, and no stat field
// ever moves, nor does the inode's change counter, which statx does not
// give user space anyway (STATX_CHANGE_COOKIE is kernel-only). Such a
// rewrite is found at the next full check instead of never (the Claude
// transcript's watch counts the same way); at the
// default interval of one second, within ten.
const recheckPolls = 10

// beingCreated reports err as a header not written yet (history's
// incomplete-header) in a file that had none: a file being created. Pi
// creates the file ("wx") and then writes the header line in a second
// call, so a poll between the two finds it empty. It is never so for
// longer than a process takes between two system calls, unless whoever
// created it never writes: after halfLineTicks polls it is no Pi's file.
func beingCreated(err error, prev *history.Snapshot) bool {
	return protocol.CodeOf(err) == protocol.CodeIncompleteHeader && (prev == nil || prev.New())
}

// follow moves the pinned leaf to the one the engine's own appends made,
// so the binding, a recover confirmation and the eligibility record all
// name the leaf the conversation is on now, not the one it started from.
func (c *Controller) follow(x *execution, leaf string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.st.exec != x || c.st.binding != protocol.BindingActive || leaf == "" || leaf == c.st.leaf {
		return
	}
	c.st.leaf = leaf
	c.publishBindingLocked()
}

// sawWritten records that the session file of x's execution exists with
// header id: the evidence, kept on the stopped revision, that recovering
// this conversation must find that file again (recover.go). Recorded
// before the entries are vouched for: a file a foreign writer replaced is
// still a session that exists somewhere, never a reason to start anew.
// A header that names another session than the engine's (a file a tool
// made at the path before Pi's first write, which Pi makes with O_EXCL)
// is not recorded: it returns the engine's session id, for the caller to
// name another writer. Empty otherwise.
func (c *Controller) sawWritten(x *execution, id string) (engine string) {
	if id == "" || !history.PlainID(id) {
		return ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.st.exec != x {
		return ""
	}
	if c.st.sessionID != "" && id != c.st.sessionID {
		return c.st.sessionID
	}
	c.st.written = id
	return ""
}

// unvouched returns the first entry snap appended that the engine does
// not hold as written, and why, or "": an id the engine never held is
// another writer's append; an entry it holds otherwise, another writer's
// edit (rewritten).
func unvouched(snap *history.Snapshot, ours map[string]heldEntry) (id, what string) {
	for _, id := range snap.Appended() {
		if _, ok := ours[id]; !ok {
			return id, "entry " + id + " was appended to the session file by another writer"
		}
	}
	// The id is not enough: a writer that edits an entry the engine
	// appended, before this check, keeping its id (a user message
	// reworded), has its words vouched for as the engine's, and a wake or
	// recover sends them to the model as this conversation's.
	if id := rewritten(snap.AppendedLines(), ours, nil); id != "" {
		return id, "entry " + id + " in the session file is not the one the engine holds: another writer changed it before it was checked"
	}
	return "", ""
}

// heldEntry is what the engine holds of one entry: as it answers
// get_entries now (nil when the answer was cut), and the ways it may have
// announced it when it appended it (none if it did not,
// pi.Entries.Announced). Each is the engine's own.
type heldEntry struct {
	now       json.RawMessage
	announced []json.RawMessage
}

// rewritten returns the id of the first of lines whose entry the engine
// holds otherwise (compared as JSON values: the engine's answer need not
// spell it byte for byte as its append did), or "". Lines of no entry the
// engine holds (the header) are not compared: the ids were checked first;
// nor are entries whose answer was cut and that were not announced
// (engineEntries), nor, when only is set, the lines it does not take.
func rewritten(lines [][]byte, ours map[string]heldEntry, only func(entry map[string]any) bool) string {
	for _, l := range lines {
		var file any
		if json.Unmarshal(l, &file) != nil {
			continue
		}
		obj, _ := file.(map[string]any)
		if only != nil && !only(obj) {
			continue
		}
		id, _ := obj["id"].(string)
		h, ok := ours[id]
		if !ok || h.now == nil && h.announced == nil {
			continue
		}
		if !sameJSON(file, h.now) && !slices.ContainsFunc(h.announced, func(a json.RawMessage) bool { return sameJSON(file, a) }) {
			return id
		}
	}
	return ""
}

// sameJSON says whether raw (if any) decodes to the value v.
func sameJSON(v any, raw json.RawMessage) bool {
	var w any
	return raw != nil && json.Unmarshal(raw, &w) == nil && reflect.DeepEqual(v, w)
}

// engineEntries returns the entries the engine holds after the
// last entry of prev, which the engine holds too (it loaded it or wrote
// it, or an earlier check would have found it foreign): only what is new,
// never the whole session. size is the file's size now: what it grew by
// bounds how long the answer may take.
func engineEntries(x *execution, prev *history.Snapshot, size int64) (map[string]heldEntry, error) {
	p, err := probe(x, "get_entries")
	if err != nil {
		return nil, err
	}
	return heldAfter(context.Background(), p, prev, size)
}

// heldAfter is engineEntries asked of p.
func heldAfter(ctx context.Context, p sessionProbe, prev *history.Snapshot, size int64) (map[string]heldEntry, error) {
	since, grown := "", size
	if prev != nil && !prev.New() {
		since = prev.LeafID()
		grown -= prev.Size()
	}
	ents, err := p.GetEntriesWithin(ctx, since, pi.Budget(10*time.Second, grown))
	if err != nil {
		return nil, err
	}
	ours := map[string]heldEntry{}
	for i, raw := range ents.Entries {
		var e struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(raw, &e) != nil {
			continue
		}
		h := heldEntry{now: raw}
		if i < len(ents.Cut) && ents.Cut[i] {
			// An answer over the engine's line bound had this entry's
			// long strings cut: its id is the engine's, its words are
			// not known here, and comparing them would call the engine's
			// own append foreign.
			h.now = nil
		}
		if i < len(ents.Announced) {
			// Pi holds an extension's data and details objects, not
			// copies: one the extension changed since has its entry
			// returned as the object is now. The entry as Pi announced
			// it at its append is the line as written, and a writer's
			// edit matches none.
			h.announced = ents.Announced[i]
		}
		ours[e.ID] = h
	}
	return ours, nil
}

// foreign closes admission after a foreign write; id names the foreign
// entry, if one is known. A stop that ends the engine (forceRunning)
// keeps the binding and the claim its own: the write is noticed and
// journaled, the view must be re-read, and the stop's end decides the
// rest (a claim marked uncertain over its stopping would keep a
// successor from resuming the stop, K10).
func (c *Controller) foreign(x *execution, what, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.st.reconcile = true
	c.broadcastLocked(protocol.Notice{Record: protocol.RecordNotice, Kind: protocol.NoticeForeignWriter,
		Message: "another writer changed this conversation's session file (" + what + "); admission is closed and the view must be re-read"})
	if !c.st.forceRunning {
		c.st.binding = protocol.BindingUncertain
		c.closeAdmissionLocked("foreign-writer: " + what)
		c.publishBindingLocked()
		c.markUncertainLocked("foreign writer: " + what)
	}
	fields := map[string]string{"EXECUTION": x.id, "REFUSAL": protocol.NoticeForeignWriter}
	if id != "" {
		fields["ENTRY"] = id
	}
	c.audit(audit.Foreign, nil, "foreign writer: "+what, fields)
}
