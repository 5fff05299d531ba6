package controller

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"time"

	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/history"
	hclaude "github.com/mosaic-agents/mosaic/history/claude"
	"github.com/mosaic-agents/mosaic/protocol"
)

// transcriptVerdict is what one re-read of a Claude transcript shows
// against the previous read the controller vouched for.
type transcriptVerdict struct {
	foreign string // another writer: what it did
	k8      string // the resumed session did not continue the pinned leaf
	// continued is set once the first prompt after a resume was found on
	// the pinned leaf's chain (the K8 check is done).
	continued bool
	leaf      string
}

// checkTranscript compares now with prev. Every main-chain entry of prev
// must still be there with the same parent (else the file was rewritten).
// A new prompt line (promptSource set) must carry a uuid this execution
// sent (sent): the CLI writes each prompt under the uuid the host gave it
// (DIGEST §8), so any other is another writer's (a second `claude
// --resume` of the session, by the user or by a tool). pinned, when not
// empty, is the leaf a resume pinned: the first new prompt of ours must
// descend from it (K8 after the first resumed prompt: the CLI writes
// nothing before it, so the load check could only read the file).
func checkTranscript(prev, now *hclaude.Transcript, sent func(string) bool, pinned string) transcriptVerdict {
	v := transcriptVerdict{leaf: now.DefaultLeaf()}
	for _, id := range prev.Order() {
		was, _ := prev.Entry(id)
		is, ok := now.Entry(id)
		if !ok || is.Parent != was.Parent {
			v.foreign = "entry " + id + " was removed or rewritten"
			return v
		}
	}
	for _, id := range now.Order() {
		if _, old := prev.Entry(id); old {
			continue
		}
		e, _ := now.Entry(id)
		if !e.Prompt {
			continue
		}
		if !sent(id) {
			v.foreign = "prompt " + id + " was written by another writer"
			return v
		}
		if pinned != "" && !v.continued {
			if !now.Ancestor(pinned, id) {
				v.k8 = fmt.Sprintf("the first prompt after the resume (%s) does not continue the pinned leaf %s", id, pinned)
				return v
			}
			v.continued = true
		}
	}
	return v
}

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
// A re-attached controller does not know the uuids the previous one sent:
// a prompt line the CLI writes after the restart for a prompt sent before
// it counts as foreign (admission closes; fail closed).
//
// from is the transcript as the launch (or the re-attach) read and
// checked it, nil for a new session: the watch starts from those bytes,
// so what changed before its first tick is checked too, never taken as
// its start and vouched for.
func (c *Controller) watchClaude(x *execution, pinned string, resumed bool, from *hclaude.Transcript) {
	ledger, err := driverAs[promptLedger](x.conn, "watch the transcript")
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
		case fi.Size() == size && fi.ModTime().Equal(mod) && changeTime(fi).Equal(change):
			continue
		case size >= 0 && (fi.Size() < size || inode(fi) != ino):
			c.foreign(x, "the transcript was replaced or shortened", "")
			return
		}
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
		v := checkTranscript(prev, now, ledger.SentPrompt, k8)
		switch {
		case v.foreign != "":
			c.foreign(x, v.foreign, "")
			return
		case v.k8 != "":
			c.resumeDiverged(x, v.k8)
			return
		}
		if v.continued {
			k8 = ""
		}
		c.follow(x, v.leaf)
		prev, size, mod, change, ino = now, fi.Size(), fi.ModTime(), changeTime(fi), inode(fi)
		x.checked.Store(size)
		x.vouchTranscript(now)
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
}

// lastCheck checks a Claude transcript once more when a stop has proven
// the cohort gone, as the watch checks it, and vouches for what passes:
// the CLI writes its last lines as its stdin closes (a stop closes it
// first), after the watch stopped following an engine that exited, and
// the wake would refuse those bytes as another writer's. A prompt line
// this execution never sent, or a rewrite, is not vouched for: the stop
// records the bytes the watch last vouched for, and the wake and a
// recover name the rest.
func (c *Controller) lastCheck(x *execution) {
	if x == nil || x.conn == nil || !c.cfg.Conversation.IsClaude() {
		return
	}
	ledger, err := driverAs[promptLedger](x.conn, "check the transcript")
	if err != nil {
		return
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
	if v := checkTranscript(prev, now, ledger.SentPrompt, ""); v.foreign == "" {
		x.vouchTranscript(now)
	}
}

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
