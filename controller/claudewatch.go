package controller

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
	"time"

	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/history"
	hclaude "github.com/mosaic-agents/mosaic/history/claude"
	"github.com/mosaic-agents/mosaic/protocol"
)

// watchClaude is watchSession for a Claude transcript (W10 and K8 after
// the first resumed prompt): each time the file changes it is read again
// (only the file the binding names, history/claude's safe open) and
// checked with checkTranscript; a file replaced (another inode), shortened,
// rewritten or no longer readable is a foreign write too. At each change
// only the appended lines are parsed; the bytes read before are hashed
// again and must be unchanged (hclaude.Follow), so an engine that keeps
// rewriting its transcript costs one hash of it per poll, bounded by the
// reader's size limit. resumed says the launch used --resume, so pinned
// must be continued by the first prompt.
//
// Only lines proven the CLI's are vouched for (checkTranscript): the
// watch follows the file from the read it last vouched for, and while a
// line waits for its proof nothing after it is vouched either. One that
// waits for its stdout frame more than halfLineTicks polls is another
// writer's; one that waits for a descendant (an attachment) only stays
// unvouched, so a stop records the bytes before it and the wake or a
// recover names the rest.
//
// A re-attached controller knows of the uuids the previous one sent and
// the frames it read only the latest it handed over (handover.go): a
// line the CLI writes after the restart for an older one counts as
// foreign (admission closes; fail closed).
//
// from is the transcript as the launch read and checked it, or the bytes
// the previous controller handed over at a restart (reattachHead), nil
// for a new session: the watch starts from those bytes, so what changed
// before its first tick is checked too, never taken as its start and
// vouched for.
func (c *Controller) watchClaude(x *execution, pinned string, resumed bool, from *hclaude.Transcript) {
	said, err := driverAs[announcements](x.conn, "watch the transcript")
	if err != nil {
		c.foreign(x, "the transcript can no longer be vouched for: "+err.Error(), "")
		return
	}
	ref := c.claudeRef(c.cfg.Conversation)
	path, err := ref.Path()
	if err != nil {
		return
	}
	prev, err := from, error(nil)
	if prev == nil {
		prev, err = hclaude.Empty(ref)
	}
	if err != nil {
		c.foreign(x, "the transcript can no longer be vouched for ("+protocol.CodeOf(err)+"): "+err.Error(), "")
		return
	}
	k8 := ""
	if resumed {
		k8 = pinned
	}
	var size int64 = -1
	var mod, change time.Time
	var ino uint64
	halfAt, halfTicks := int64(-1), 0
	// waitID is the line waiting for its frame at the last poll, and
	// waitTicks for how many polls it has.
	waitID, waitTicks := "", 0
	skipped := 0 // polls in a row that found size and times unchanged
	if !prev.New() {
		// The file's size and inode as read; no time, so the first tick
		// follows it whatever changed since.
		size, ino = prev.Size(), prev.Inode()
		x.checked.Store(size)
	}
	// What the watch starts from is vouched for as the launch's load
	// check read it (claudeLoadCheck: the CLI writes nothing before the
	// first prompt); each check after vouches for what it read, and a
	// stop records the last (claims.Record.Vouched), which the wake and a
	// recover hold the transcript to.
	x.vouchTranscript(prev)
	t := time.NewTicker(c.cfg.PollInterval)
	defer t.Stop()
	for range t.C {
		if !c.watching(x) {
			return
		}
		fi, err := os.Lstat(path)
		switch {
		case errors.Is(err, fs.ErrNotExist) && size < 0:
			continue // not written yet: a new session before its first prompt
		case err != nil:
			c.foreign(x, "the transcript is gone: "+err.Error(), "")
			return
		case fi.Size() == size && fi.ModTime().Equal(mod) && changeTime(fi).Equal(change) && waitID == "" && skipped+1 < recheckPolls:
			// A store through a shared mapping moves no stat field:
			// every recheckPolls-th poll reads the file anyway.
			skipped++
			continue
		case size >= 0 && (fi.Size() < size || inode(fi) != ino):
			c.foreign(x, "the transcript was replaced or shortened", "")
			return
		}
		skipped = 0
		if !endsLine(path, fi.Size()) {
			// The CLI is still writing its last line: read it whole at a
			// later tick. A half line that stays (a writer that stopped
			// mid-line) is read as it is after halfLineTicks, and fails.
			if fi.Size() != halfAt {
				halfAt, halfTicks = fi.Size(), 0
			}
			if halfTicks++; halfTicks < halfLineTicks {
				continue
			}
		}
		now, err := hclaude.Follow(prev)
		if err != nil {
			c.foreign(x, "the transcript can no longer be vouched for ("+protocol.CodeOf(err)+"): "+err.Error(), "")
			return
		}
		v := checkTranscript(prev, now, said, k8)
		switch {
		case v.foreign != "":
			c.foreign(x, v.foreign, "")
			return
		case v.k8 != "":
			c.resumeDiverged(x, v.k8)
			return
		}
		size, mod, change, ino = fi.Size(), fi.ModTime(), changeTime(fi), inode(fi)
		if v.unproven != "" {
			x.heldBack.Store(&heldBack{t: now, line: v.pendingLine})
		}
		if v.waiting {
			if v.unprovenID != waitID {
				waitID, waitTicks = v.unprovenID, 0
			}
			if waitTicks++; waitTicks >= halfLineTicks {
				c.foreign(x, v.unproven, "")
				return
			}
			continue
		}
		waitID = ""
		// What waits for a descendant is read and judged: a hibernate
		// need not wait for it (idleSession), and records the bytes
		// before it.
		x.checked.Store(size)
		if v.unproven != "" {
			continue
		}
		if v.continued {
			k8 = ""
		}
		c.follow(x, v.leaf)
		prev = now
		x.vouchTranscript(now)
		x.heldBack.Store(nil)
	}
}

// vouchTranscript records t as what the watch vouched for, unless a
// check already vouched for more of the file (the stop's last check and
// the watch's own may overlap; the transcript only grows).
func (x *execution) vouchTranscript(t *hclaude.Transcript) {
	x.transcript.Lock()
	defer x.transcript.Unlock()
	if x.transcript.t != nil && x.transcript.t.Size() > t.Size() {
		return
	}
	x.transcript.t = t
	x.vouched.Store(fileState(t))
	if m := x.mark.Load(); m != nil {
		m.poke()
	}
}

// lastCheck checks a Claude transcript once more when a stop has proven
// the cohort gone, as the watch checks it, and vouches for what passes:
// the CLI writes its last lines as its stdin closes (a stop closes it
// first), after the watch stopped following an engine that exited, and
// the wake would refuse those bytes as another writer's. It first lets
// the reader finish the engine's stdout (its writer is gone, so the rest
// is in the pipe): the frames announcing those lines come before them. A
// line not proven the CLI's, or a rewrite, is not vouched for: the stop
// records the bytes the watch last vouched for, and the wake and a
// recover name the rest.
func (c *Controller) lastCheck(x *execution) {
	if x == nil || x.conn == nil || !c.cfg.Conversation.IsClaude() {
		return
	}
	said, err := driverAs[announcements](x.conn, "check the transcript")
	if err != nil {
		return
	}
	select {
	case <-x.conn.Done():
	case <-time.After(lastReadWait):
	}
	x.transcript.Lock()
	prev := x.transcript.t
	x.transcript.Unlock()
	if prev == nil {
		return
	}
	now, err := hclaude.Follow(prev)
	if err != nil {
		return
	}
	if v := checkTranscript(prev, now, said, ""); v.foreign == "" && v.unproven == "" {
		x.vouchTranscript(now)
	}
}

// lastReadWait bounds how long lastCheck waits for the engine's stdout to
// be read to its end.
const lastReadWait = 2 * time.Second

// halfLineTicks is how many polls a transcript may end in the same half
// line, or a new Pi session file miss its header, before it is read as it
// is (and found unreadable).
const halfLineTicks = 20

// endsLine says the file's last byte (of size) is a LF: a read now sees
// only whole lines. Opened with the history reader's safe-open rules; a
// file that cannot be read that way is left to hclaude.Read to report.
func endsLine(path string, size int64) bool {
	if size == 0 {
		return true
	}
	f, err := history.OpenRead(path, history.DefaultMaxSize)
	if err != nil || f == nil {
		return true
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], size-1); err != nil {
		return true
	}
	return b[0] == '\n'
}

// watching says x is still the current execution and its engine runs.
func (c *Controller) watching(x *execution) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.st.exec == x && !x.exited
}

// changeTime is the file's status change time (st_ctime): unlike the
// modification time, a writer cannot set it back, so a same-size rewrite
// that restores the mtime still shows as a change to the watches.
func changeTime(fi fs.FileInfo) time.Time {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return time.Unix(st.Ctim.Unix())
	}
	return time.Time{}
}

func inode(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}

// resumeDiverged is a failed K8 found after the first resumed prompt:
// the binding becomes uncertain and admission closes, as a failed load
// check leaves it (force stop, then recover).
func (c *Controller) resumeDiverged(x *execution, why string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.st.preflight = why
	c.st.reconcile = true
	if !c.st.forceRunning { // a stop under way keeps them (foreign)
		c.st.binding = protocol.BindingUncertain
		c.closeAdmissionLocked("preflight: " + why)
		c.publishBindingLocked()
		c.markUncertainLocked("K8: " + why)
	}
	c.audit(audit.Refusal, nil, "load check failed after the first resumed prompt; admission stays closed: "+why,
		map[string]string{"EXECUTION": x.id, "REFUSAL": protocol.CodePreflight})
}
