package controller

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/engine/pi"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/scopes"
)

// FDStore keeps descriptors across a controller restart: the service
// manager's file descriptor store (activation.FDStore) under systemd.
type FDStore interface {
	// Store keeps a copy of f under name.
	Store(name string, f *os.File) error
	// Remove drops every copy kept under name.
	Remove(name string) error
}

// The roles of the kept descriptors of an execution, stored under
// "<execution>.<role>".
const (
	keptStdin  = "stdin"
	keptStdout = "stdout"
	keptStderr = "stderr"
	keptPidFD  = "pidfd"
	keptStop   = "stop" // the held child's stop pipe (scopes.Handle.StopPipe)
)

var keptRoles = []string{keptStdin, keptStdout, keptStderr, keptPidFD, keptStop, keptMarkRole}

// engineRoles are keptRoles but the mark: what is dropped once the
// engine is gone. The mark stays until the execution's stop is recorded
// (recordProof), or a restart finds the claim stopped or on another
// execution (resume): a controller that adopts the gone engine, or is
// restarted before the stop is proven, hands the bytes on through it,
// as no claim revision does.
var engineRoles = []string{keptStdin, keptStdout, keptStderr, keptPidFD, keptStop}

func keptName(exec, role string) string { return exec + "." + role }

// keep hands the engine's pipe ends, a pidfd of it and the held child's
// stop pipe to the fd store, so that a restarted controller can
// re-attach (F19) and give the tools their grace in a stop. Without a store, or if
// any part fails, nothing stays kept: a partial set could not be resumed,
// and the engine then ends with this controller, as it always did. A
// store that can count (storeCounter) must hold as many more descriptors
// after as were handed to it: the manager drops one past
// FileDescriptorStoreMax= with a line in its own log only.
func (c *Controller) keep(x *execution) {
	st := c.cfg.FDStore
	if st == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.commandTimeout())
	defer cancel()
	counter, _ := st.(storeCounter)
	before, cerr := -1, error(nil)
	if counter != nil {
		before, _, cerr = counter.Held(ctx)
	}
	h := x.handle
	stored := 0
	pidfd, err := h.EnginePidFD()
	if err == nil {
		defer pidfd.Close() // the store holds its own copy
		for role, f := range map[string]*os.File{keptStdin: h.Stdin, keptStdout: h.Stdout, keptStderr: h.Stderr, keptPidFD: pidfd,
			keptStop: h.StopPipe()} {
			if f == nil {
				continue
			}
			if err = st.Store(keptName(x.id, role), f); err != nil {
				break
			}
			stored++
		}
	}
	if err != nil {
		c.notKept(x, err.Error())
		return
	}
	c.mu.Lock()
	x.kept = true
	c.mu.Unlock()
	if c.keepMark(x, nil, 0) {
		stored++
	}
	switch {
	case counter == nil:
	case cerr != nil:
		c.audit(audit.Transition, nil, fmt.Sprintf("execution %s: cannot tell whether the fd store kept its %d descriptors (%v): a controller restart may orphan its engine", x.id, stored, cerr),
			map[string]string{"EXECUTION": x.id})
	default:
		after, limit, err := counter.Held(ctx)
		switch {
		case err != nil:
			c.audit(audit.Transition, nil, fmt.Sprintf("execution %s: cannot tell whether the fd store kept its %d descriptors (%v): a controller restart may orphan its engine", x.id, stored, err),
				map[string]string{"EXECUTION": x.id})
		case after-before != stored:
			c.mu.Lock()
			x.kept = false
			c.mu.Unlock()
			c.notKept(x, shortfall(after-before, stored, after, limit))
		}
	}
}

// shortfall says why the store took only got of the stored descriptors
// handed to it, holding held of its limit: at the limit,
// FileDescriptorStoreMax= is too low; below it, the manager dropped some
// by itself, as it does a pipe whose other end closed (an engine that
// ended as it launched).
func shortfall(got, stored, held, limit int) string {
	if held >= limit {
		return fmt.Sprintf("the manager holds %d more descriptors, not the %d handed to it: FileDescriptorStoreMax= of mosaic-conv@.service (%d) reached; raise it in a drop-in", got, stored, limit)
	}
	return fmt.Sprintf("the manager holds %d more descriptors, not the %d handed to it, below its limit of %d: it dropped the others by itself, as it does a pipe whose other end closed (the engine may have exited)", got, stored, limit)
}

// notKept drops what keep stored of x and says why: a restart cannot
// re-attach to a partial set.
func (c *Controller) notKept(x *execution, why string) {
	c.dropKept(x.id, keptRoles...)
	c.audit(audit.Transition, nil, fmt.Sprintf("execution %s is not kept in the fd store (%s): a controller restart will orphan its engine", x.id, why),
		map[string]string{"EXECUTION": x.id})
}

// storeCounter is an FDStore that can count what it holds once the
// manager has processed every request sent before (activation's
// Barrier, then NFileDescriptorStore).
type storeCounter interface {
	Held(ctx context.Context) (held, max int, err error)
}

// unkeep drops an execution's descriptors from the store once its engine
// is gone: a restarted controller must never re-attach to the pipes of a
// dead engine (the manager drops a pipe whose other end closed by itself,
// a pidfd only once reaped and only on Linux >= 6.9).
func (c *Controller) unkeep(x *execution) {
	c.mu.Lock()
	kept := x.kept
	x.kept = false
	c.mu.Unlock()
	if kept {
		c.dropKept(x.id, engineRoles...)
	}
}

// unkeepStdin drops the store's copy of x's stdin alone, for a stop that
// ends the engine by closing it (hibernate). The rest stays kept: a
// controller that ends before the stop does still resumes it (K10) with
// the stop pipe and the pidfd, and an engine that lost its stdin is one
// no restart re-attaches to (scopes.Manager.Resume refuses without it).
func (c *Controller) unkeepStdin(x *execution) {
	c.mu.Lock()
	kept := x.kept
	c.mu.Unlock()
	if kept {
		c.dropKept(x.id, keptStdin)
	}
}

// dropKept drops exec's descriptors of roles from the store.
func (c *Controller) dropKept(exec string, roles ...string) {
	if c.cfg.FDStore == nil {
		return
	}
	for _, role := range roles {
		c.cfg.FDStore.Remove(keptName(exec, role))
	}
}

// keptByExecution groups the descriptors the store handed back by
// execution, the marks (markkeep.go) apart, and takes them out of the
// config (they are used once).
func (c *Controller) keptByExecution() (map[string]scopes.Kept, map[string]*os.File) {
	out, marks := map[string]scopes.Kept{}, map[string]*os.File{}
	for name, f := range c.cfg.Kept {
		i := strings.LastIndexByte(name, '.')
		if i <= 0 {
			f.Close()
			continue
		}
		exec, role := name[:i], name[i+1:]
		if role == keptMarkRole {
			marks[exec] = f
			continue
		}
		k := out[exec]
		switch role {
		case keptStdin:
			k.Stdin = f
		case keptStdout:
			k.Stdout = f
		case keptStderr:
			k.Stderr = f
		case keptPidFD:
			k.PidFD = f
		case keptStop:
			k.Stop = f
		default:
			f.Close()
		}
		out[exec] = k
	}
	c.cfg.Kept = nil
	return out, marks
}

// resume re-attaches to the engine a previous controller of this
// conversation launched, through the descriptors it kept (F19). It
// returns false, having closed and dropped them, when there is nothing to
// re-attach to: then start goes on as without them (Recover classifies
// the claim; a live engine is an orphan). Only an active claim of the
// kept execution whose engine the pidfd proves alive is resumed; the
// claim stays what it was (claims.Store.Reattach). A stopping claim's
// execution's descriptors it returns (stop) for the stop a restart
// resumes (K10, adopt): its TERM phase still gives the tools their grace
// (scopes.Handle.HoldKept). They stay in the store until that stop has
// signalled (conclude), so that a controller that ends before it leaves
// them to the next.
//
// Once re-attached, a failure to find the line boundary or to match the
// bound session leaves the binding uncertain, as a failed load check
// does: the claim is the engine's, and only a force stop moves it on.
func (c *Controller) resume(ctx context.Context, keys claims.Keys) (done bool, stop *keptStopping, err error) {
	all, marks := c.keptByExecution()
	defer func() {
		for exec, f := range marks {
			f.Close()
			c.dropKept(exec, keptMarkRole)
		}
	}()
	if len(all) == 0 && len(marks) == 0 {
		return false, nil, nil
	}
	markStays := "" // the claim's execution while its stop is unrecorded
	drop := func(why string) {
		if len(all) == 0 {
			return // a stopping claim's own were handed on
		}
		names := make([]string, 0, len(all))
		for exec, k := range all {
			k.Close()
			if exec == markStays {
				c.dropKept(exec, engineRoles...)
			} else {
				c.dropKept(exec, keptRoles...)
			}
			names = append(names, exec)
		}
		sort.Strings(names)
		c.audit(audit.Transition, nil, fmt.Sprintf("kept descriptors of %s dropped: %s", strings.Join(names, ", "), why),
			map[string]string{"EXECUTIONS": strings.Join(names, ",")})
	}
	cur, err := c.cfg.Claims.Current(ctx, keys)
	if err != nil || cur.Seat == nil {
		drop(fmt.Sprintf("no claim to re-attach (%v)", err))
		return false, nil, nil
	}
	rec := cur.Seat
	if rec.State != claims.Stopped {
		markStays = rec.Execution
	}
	if f := marks[rec.Execution]; f != nil {
		// Read before anything is dropped: an engine found gone is
		// adopted, and its proven stop records the mark's bytes too.
		delete(marks, rec.Execution)
		c.crashed = takeMark(rec.Execution, f)
	}
	k, ok := all[rec.Execution]
	if ok && rec.State == claims.Stopping {
		stop = &keptStopping{exec: rec.Execution, Kept: k}
		delete(all, rec.Execution)
	}
	if !ok && c.crashed != nil && markStays == "" {
		// The manager dropped the engine's pipes by itself (it exited)
		// and the stop is recorded: nothing else of the execution's stays
		// kept to drop it with. Before the stop is recorded it stays: a
		// restart of the controller that adopts the orphan needs it too.
		c.dropKept(rec.Execution, keptMarkRole)
	}
	if !ok || rec.State != claims.Active {
		drop(fmt.Sprintf("the claim is %s for execution %s", rec.State, rec.Execution))
		return false, stop, nil
	}
	delete(all, rec.Execution)
	if len(all) > 0 {
		drop("not the claim's execution " + rec.Execution)
	}
	all = map[string]scopes.Kept{rec.Execution: k}
	co, err := c.loadCohort(rec.Execution)
	if err != nil {
		drop(err.Error())
		return false, nil, nil
	}
	h, err := c.cfg.Scopes.Resume(co, k)
	if err != nil {
		drop(err.Error())
		return false, nil, nil
	}
	claim, err := c.cfg.Claims.Reattach(ctx, keys, rec.Execution, claims.Process{BootID: co.BootID, PID: co.PID, StartTime: co.StartTime, Cgroup: co.Cgroup})
	if err != nil {
		if protocol.CodeOf(err) == protocol.CodeAlreadyActive {
			k.Close() // the live controller keeps them in the store
			return true, nil, err
		}
		drop(err.Error())
		return false, nil, nil
	}
	n, err := c.countResume(rec.Execution)
	if err != nil {
		// The claim is ours now; an engine we cannot number events for
		// is one we cannot show without confusing two streams, but it
		// may run: its execution is recorded with the resumed handle, so
		// a force stop proves its cohort ended, and its descriptors stay
		// kept for a restart that can number it.
		cv, serr := c.settings()
		if serr != nil {
			cv = c.cfg.Conversation
		}
		c.unopened(claim, c.resumedExecution(claim, h, cv), err)
		return true, nil, nil
	}
	return true, nil, c.reattach(ctx, claim, h, n)
}

// keptStopping is what a previous controller kept of a stopping claim's
// engine, for the stop a restart resumes (adopt, conclude).
type keptStopping struct {
	exec string
	scopes.Kept
}

// close closes the descriptors and drops them from the store: the stop
// they were kept for no longer needs them, or never will.
func (k *keptStopping) close(c *Controller) {
	k.Close()
	c.dropKept(k.exec, engineRoles...)
}

// resumedExecution is the execution of a re-attached engine, before any
// connection to it is opened: its descriptors are in the fd store. cv is
// the settings the caller chose the engine's driver by.
func (c *Controller) resumedExecution(claim *claims.Claim, h *scopes.Handle, cv *conversations.Conversation) *execution {
	rec := claim.Record()
	return &execution{id: rec.Execution, handle: h, pins: rec.Pins, engineName: engineNameOf(cv),
		stderr: c.readStderr(rec.Execution, h), kept: true}
}

// reattach is resume once the claim is this controller's: talk to the
// engine again, find a line boundary, check what it holds, open
// admission.
func (c *Controller) reattach(ctx context.Context, claim *claims.Claim, h *scopes.Handle, n uint64) error {
	rec := claim.Record()
	execID := rec.Execution
	cv, err := c.settings()
	if err != nil {
		cv = c.cfg.Conversation
	}
	if cv.IsClaude() {
		return c.reattachClaude(ctx, claim, h, n, cv)
	}
	x := c.resumedExecution(claim, h, cv)
	conn, err := c.openEngine(cv, h, c.reattachOptions(execID, n))
	if err != nil {
		c.unopened(claim, x, err)
		return nil
	}
	rs, err := driverAs[piResyncer](conn, "re-attach")
	if err != nil {
		conn.Close()
		c.unopened(claim, x, err)
		return nil
	}
	x.conn = conn
	c.adoptReattached(claim, x)

	head, err := readSessionHead(c.cfg.Conversation.Session)
	var size int64
	if err == nil && head.snap != nil {
		size = head.snap.Size()
	}
	st, skipped, rerr := rs.Resync(ctx, pi.Budget(c.cfg.CommandTimeout, size))
	restart := &protocol.Restart{At: time.Now().UTC().Format(time.RFC3339Nano), Resume: n, SkippedBytes: skipped, RunInProgress: st.IsStreaming}
	if err == nil {
		err = rerr
	}
	var leaf string
	if err == nil {
		leaf, err = c.checkReattached(ctx, x, head, st, size)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.st.restart = restart
	fields := map[string]string{"EXECUTION": execID, "ENGINE_PID": fmt.Sprint(h.Cohort.PID), "RESUME": fmt.Sprint(n),
		"SKIPPED_BYTES": fmt.Sprint(skipped), "RUN_IN_PROGRESS": fmt.Sprint(st.IsStreaming)}
	if err != nil {
		c.reattachFailedLocked(execID, err, fields)
		return nil
	}
	c.reattachedLocked(st.SessionID, leaf)
	c.audit(audit.Transition, nil, fmt.Sprintf("controller restarted: re-attached to execution %s (engine pid %d, resume %d, %d bytes skipped to a line boundary, run in progress %v)",
		execID, h.Cohort.PID, n, skipped, st.IsStreaming), fields)
	go c.watchSession(x, head.snap)
	go c.watchIdle(x)
	return nil
}

// checkReattached checks that the engine still holds the bound session,
// that the session file's last entry is one of the engine's own (an
// entry another writer appended while no controller watched is not) and
// that its other entries are too (wordsHeld), and returns the engine's
// leaf.
func (c *Controller) checkReattached(ctx context.Context, x *execution, head sessionHead, st pi.State, size int64) (string, error) {
	if st.SessionFile != c.cfg.Conversation.Session {
		return "", fmt.Errorf("engine holds %q, not the bound session file", st.SessionFile)
	}
	if !head.exists {
		return "", nil
	}
	if st.SessionID != head.id {
		return "", fmt.Errorf("engine holds session %s, the file's header is %s", st.SessionID, head.id)
	}
	p, err := probe(x, "get_entries")
	if err != nil {
		return "", err
	}
	ents, err := p.GetEntriesWithin(ctx, head.leaf, pi.Budget(c.cfg.CommandTimeout, size))
	if err != nil {
		return "", fmt.Errorf("the session file's last entry %s is not the engine's (foreign writer?): %w", head.leaf, err)
	}
	if err := wordsHeld(ctx, p, head, size); err != nil {
		return "", err
	}
	return ents.LeafID, nil
}

// wordsHeld checks, for a re-attachment, that every entry of the session
// file is one the engine holds, and that its user and assistant messages
// are as the engine holds them: a writer that rewrote one in place while
// no controller watched (a prompt reworded, its id kept) would have its
// words sent to the model as this conversation's, and the new watch
// follows the file from here on. The other entries are checked by id
// alone: one holding an extension's object may show the extension's
// changes since in get_entries, and a restarted controller heard none of
// the announcements that vouch for the line as written (pi.Entries.
// Announced). A session too large for one answer is left to the last
// entry's check, as before.
func wordsHeld(ctx context.Context, p sessionProbe, head sessionHead, size int64) error {
	ours, err := heldAfter(ctx, p, nil, size)
	if errors.Is(err, pi.ErrAnswerTooLarge) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("the engine's entries, to compare the session file with: %w", err)
	}
	for _, id := range head.snap.Appended() {
		if _, ok := ours[id]; !ok {
			return fmt.Errorf("entry %s of the session file is not the engine's: another writer appended it (foreign writer)", id)
		}
	}
	if id := rewritten(head.snap.AppendedLines(), ours, spoken); id != "" {
		return fmt.Errorf("entry %s of the session file is not the one the engine holds: another writer changed it while no controller watched (foreign writer)", id)
	}
	return nil
}

// spoken says whether entry is a user or an assistant message.
func spoken(entry map[string]any) bool {
	msg, _ := entry["message"].(map[string]any)
	return entry["type"] == "message" && (msg["role"] == "user" || msg["role"] == "assistant")
}

// countResume numbers this re-attachment to exec: the first free n of
// executions/<exec>.resume-<n>, created exclusively, so two controllers
// (one after the other) never share an event seq space.
func (c *Controller) countResume(exec string) (uint64, error) {
	dir := filepath.Dir(c.cohortPath(exec))
	for n := uint64(1); n < 1<<20; n++ {
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("%s.resume-%d", exec, n)), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("number the re-attachment of %s: %w", exec, err)
		}
		f.Close()
		return n, nil
	}
	return 0, fmt.Errorf("execution %s was re-attached too often", exec)
}

// restartNoticeLocked tells a connection, right after its binding, that
// this controller is a restarted one. Callers hold mu.
func (c *Controller) restartNoticeLocked(k *conn) {
	r := c.st.restart
	if r == nil || c.st.exec == nil {
		return
	}
	msg := fmt.Sprintf("the controller restarted at %s and re-attached to the running engine of execution %s: control did not survive (take it again), events before the restart are not replayed (read the history)", r.At, c.st.exec.id)
	if r.SkippedBytes > 0 {
		msg += fmt.Sprintf("; %d bytes of engine output were skipped to a line boundary", r.SkippedBytes)
	}
	c.offerLocked(k, protocol.Notice{Record: protocol.RecordNotice, Kind: protocol.NoticeRestarted, Message: msg})
}

// beforeRestartLocked reports whether an observe's fromSeq names an event
// of a controller before this re-attached one: its events are gone, so
// the client must reconcile, even when the new ring is still empty and
// the seam would otherwise look complete. Callers hold mu.
func (c *Controller) beforeRestartLocked(from *uint64) bool {
	r := c.st.restart
	return r != nil && from != nil && *from <= r.Resume<<32
}
