package controller

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/engine/pi"
	"github.com/mosaic-agents/mosaic/history"
	"github.com/mosaic-agents/mosaic/proofs"
	"github.com/mosaic-agents/mosaic/protocol"
	"github.com/mosaic-agents/mosaic/scopes"
)

// keys returns the claim keys of the conversation. The session key is the
// Pi header id; a brand-new conversation (no file yet) is keyed by its
// conversation id until a later start finds the header (the seat key,
// taken first, is what keeps a second writer out meanwhile).
func (c *Controller) keys(head sessionHead) claims.Keys {
	cv := c.cfg.Conversation
	k := claims.Keys{Seat: claims.SeatKey{Seat: cv.Seat, Project: cv.Project, Workspace: cv.Workspace}}
	k.Session = head.id
	if cv.IsClaude() {
		// The controller chose the session UUID at conv add: the key
		// from the first launch on.
		k.Session = cv.SessionKey()
		return k
	}
	if !head.exists || head.id == "" {
		k.Session = "new:" + cv.ID
	}
	return k
}

// spec returns the engine command of the conversation as configured in
// cv (settings), through its engine's Spec (which checks the pin and the
// seal), after preparing the directories the launch gives the engine.
func (c *Controller) spec(ctx context.Context, cv *conversations.Conversation) (engine.Spec, error) {
	if c.cfg.Spec != nil {
		return c.cfg.Spec(cv)
	}
	eng, err := c.engineOf(cv)
	if err != nil {
		return engine.Spec{}, err
	}
	resume := false
	if cv.IsClaude() {
		// --resume once the transcript exists (or the session was
		// adopted), else --session-id.
		if _, err := c.claudeDirs(cv); err != nil {
			return engine.Spec{}, err
		}
		head, err := c.claudeHead(ctx, cv)
		if err != nil {
			return engine.Spec{}, err
		}
		resume = head.exists || cv.Claude.Adopted
	} else {
		if cv.Engine.Entry == "" {
			return engine.Spec{}, protocol.Refuse(protocol.CodeConfiguration,
				"conversation %s has no engine; add it again with `mosaicctl conv add --engine PATH --replace`", cv.ID)
		}
		_, sealed, err := c.ownAgentDir(cv)
		if err != nil {
			return engine.Spec{}, err
		}
		spec, err := eng.Spec(ctx, resume)
		spec.Sealed = sealed
		return spec, err
	}
	return eng.Spec(ctx, resume)
}

// pinsOf digests the launch: the engine version and entry hash, and the
// whole argv, so a recovery with another binary or other flags refuses.
func pinsOf(cv *conversations.Conversation, spec engine.Spec) claims.Pins {
	if cv.IsClaude() {
		return claudePins(cv, spec)
	}
	argv, _ := json.Marshal(spec.Args)
	sum := sha256.Sum256(argv)
	return claims.Pins{EngineVersion: cv.Engine.Version, BinarySHA256: cv.Engine.SHA256, ArgvDigest: hex.EncodeToString(sum[:])}
}

// start classifies whatever a previous controller left and launches the
// engine only when nothing holds the conversation. It never launches over
// a claim that is not free (brief §2 "Restart").
func (c *Controller) start(ctx context.Context) error {
	head, err := c.readHead(ctx)
	if err != nil {
		return protocol.Wrap(protocol.CodeConfiguration, err, "")
	}
	keys := c.keys(head)
	if head.exists && !c.cfg.Conversation.IsClaude() {
		// A claim this controller adopts or re-attaches to may have
		// written the file after its launch: a stop recorded here must
		// still say a session exists (claims.Record.Written).
		c.mu.Lock()
		c.st.written = head.id
		c.mu.Unlock()
	}
	if st, err := c.cfg.Claims.Current(ctx, keys); err == nil && st.Seat != nil && st.Seat.Session != keys.Session {
		switch cur := st.Seat; {
		case cur.Conversation == c.cfg.Conversation.ID:
			// A previous start may have keyed a new conversation by its
			// id and the file exists now: follow the seat key to the
			// claim it holds.
			keys.Session = cur.Session
		case claims.Proven(cur) != nil:
			// Another conversation's claim is never followed (its stop
			// would read as this one's, its recover launch that one's
			// session here) and, while it holds the seat, never outwaited
			// by exiting: a controller that exits is restarted by its
			// socket until systemd's start limit, and says why only in
			// the journal. It serves, idle, and says it to every client.
			return seatTaken{c.seatTakenRefusal(cur)}
		}
	}
	// A previous controller kept its engine's descriptors: re-attach to
	// that engine when the claim and the engine are still what it left.
	done, stop, err := c.resume(ctx, keys)
	defer func() {
		c.crashed.close()
		c.crashed = nil
	}()
	if done || err != nil {
		return err
	}
	defer func() {
		if stop != nil {
			stop.close(c)
		}
	}()
	rec, err := c.cfg.Claims.Recover(ctx, keys)
	if err != nil {
		return err
	}
	adopt := func() error {
		s := stop
		stop = nil
		return c.adopt(ctx, rec, s)
	}
	switch rec.Verdict {
	case claims.VerdictFree:
		return c.launch(ctx, head, keys, "")
	case claims.VerdictStopped:
		// The idle policy's own proven stop wakes on the first client
		// (hibernate.go); any other stop needs recover.
		if woke, err := c.wake(ctx, head, keys, rec.Claim); woke {
			return err
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		c.st.binding = protocol.BindingStopped
		c.closeAdmissionLocked(stoppedReason(rec.Claim.Record()))
		c.st.claim = rec.Claim
		c.auditBootProof(rec.Claim.Record())
		return nil
	case claims.VerdictHeld:
		return protocol.Refuse(protocol.CodeAlreadyActive, "another controller holds conversation %s", c.cfg.Conversation.ID)
	case claims.VerdictObserve:
		// A launch a previous controller began and never released (it
		// died, or its launch failed) is withdrawn if its scope is gone
		// already; a scope still there is adopted as before.
		if withdrawable(rec.Claim.Record()) {
			err := c.withdrawLaunch(ctx, rec.Claim, "the launching controller ended before the engine was released", 0)
			if err == nil {
				return nil
			}
			c.audit(audit.Transition, nil, "restart: launch not withdrawn: "+err.Error(),
				map[string]string{"EXECUTION": rec.Claim.Record().Execution})
		}
		return adopt()
	default: // engine alive, or gone with members left, or a stop in progress
		return adopt()
	}
}

// seatTaken is a start refused because another conversation's claim
// holds the seat: unlike a second controller of this conversation (H16),
// which exits, this controller stays up and idle (Start).
type seatTaken struct{ *protocol.Refusal }

func (e seatTaken) Unwrap() error { return e.Refusal }

// seatTakenRefusal names the conversation whose claim holds the seat, its
// state and the way to free it: that conversation's own stop (its claim
// stays until a proof ends it), then a restart of this controller, which
// launches only when it starts.
func (c *Controller) seatTakenRefusal(cur *claims.Record) *protocol.Refusal {
	cv := c.cfg.Conversation
	code := protocol.CodeAlreadyActive
	if cur.State != claims.Reserved && cur.State != claims.Active {
		code = protocol.CodeUnsafeReplacement
	}
	ws := ""
	if cv.Workspace != conversations.DefaultWorkspace {
		ws = " (workspace " + cv.Workspace + ")"
	}
	return protocol.Refuse(code,
		"seat %s of project %s%s is held by conversation %s (its claim is %s): a seat runs one conversation at a time; stop that one first (`mosaicctl stop --take --yes %s`), or add this one on another seat; then `systemctl --user restart mosaic-conv@%s.service`",
		cv.Seat, cv.Project, ws, cur.Conversation, cur.State, cur.Conversation, cv.ID)
}

// adopt takes over a claim whose engine this controller cannot talk to:
// an orphan (W6), or a stop a crashed controller left running (K10). It
// never launches; it observes and leaves force stop available. stop is
// what a previous controller kept of a stopping claim's engine (resume),
// given to the handle of the stop it resumes (K10) and closed otherwise.
func (c *Controller) adopt(ctx context.Context, rec *claims.Recovery, stop *keptStopping) error {
	defer func() {
		if stop != nil {
			stop.close(c)
		}
	}()
	r := rec.Claim.Record()
	x := &execution{id: r.Execution, engineName: "orphan"}
	if v := rec.Claim.Handed(); v != nil {
		// A restart handed these over, and the next controller could not
		// re-attach: the proven stop records them, and the wake and a
		// recover hold the transcript to them (handover.go).
		x.vouched.Store(v)
	} else if m := c.markFor(r.Execution); m != nil {
		// A crash did, through the mark it kept (markkeep.go).
		v, _ := m.handed()
		x.vouched.Store(v)
	}
	co, cohortErr := c.loadCohort(r.Execution)
	if e := r.Engine; cohortErr != nil && e != nil && e.Cgroup != "" {
		// The cohort record is lost; the claim's incarnation still names
		// the engine's cgroup (and its id), pid and start time: enough to
		// prove a scope that still runs empty, not one already removed
		// (the anchor is unknown).
		if fb, err := scopes.CohortOf(r.Conversation, r.Execution, e.BootID, e.PID, e.StartTime, e.Cgroup); err == nil {
			fb.CgroupID = e.CgroupID
			if len(e.Confinement) > 0 {
				// Without it the rebuilt cohort counts as unconfined and
				// no stop of it could ever be proven.
				var conf proofs.Confinement
				if err := json.Unmarshal([]byte(e.Confinement), &conf); err != nil {
					conf = proofs.Confinement{Reason: fmt.Sprintf("the claim's confinement record does not decode: %v", err)}
				}
				fb.Confinement = conf
			}
			co, cohortErr = fb, nil
		}
	}
	if cohortErr == nil {
		x.handle = c.cfg.Scopes.Reattach(co)
		if r.State == claims.Stopping && stop != nil && stop.exec == r.Execution {
			x.handle.HoldKept(stop.Kept)
			stop = nil
		}
	}
	c.mu.Lock()
	c.st.claim = rec.Claim
	c.st.exec = x
	c.st.binding = protocol.BindingUncertain
	c.closeAdmissionLocked(fmt.Sprintf("found %s claim of execution %s (%s); force stop to prove it ended", r.State, r.Execution, rec.Verdict))
	switch {
	case r.State == claims.Stopping && x.handle == nil:
		// Without its cohort the stop can be neither resumed nor proven:
		// stopping would never end, so say uncertain and why.
		c.closeAdmissionLocked(fmt.Sprintf("found a stopping claim of execution %s, but not its cohort (%v): the stop cannot be resumed or proven; the engine's processes may live on",
			r.Execution, cohortErr))
	case r.State == claims.Stopping:
		c.st.binding = protocol.BindingStopping
	}
	c.mu.Unlock()
	c.bus.reset(r.Execution)
	c.audit(audit.Transition, nil, fmt.Sprintf("restart found execution %s %s (%s): no launch", r.Execution, r.State, rec.Verdict),
		map[string]string{"EXECUTION": r.Execution, "STATE": string(r.State), "VERDICT": string(rec.Verdict)})
	if x.handle == nil {
		return nil
	}
	switch ms, err := x.handle.Members(); {
	case r.State == claims.Stopping:
		// K10: a confirmed force stop was under way when the previous
		// controller ended. Finish that stop, and only that one: its
		// kill phase, then stopped only if the observation proves it.
		c.goStop(func() {
			c.conclude(context.WithoutCancel(ctx), x, newID("s-"), "restart resumes the force stop that was in progress", true)
		})
	case err == nil && len(ms) == 0:
		// Nothing left in the cohort: the observation alone proves the
		// end, and killing an empty cgroup kills nothing (brief §2
		// "engine gone"). Said at once: until the proof is in, a client
		// must not be told to force stop what already ended.
		c.mu.Lock()
		c.closeAdmissionLocked(fmt.Sprintf("found %s claim of execution %s with no process of its engine left (it exited with no controller to see it: a stop of the service, a crash): proving its end now; recover once it is stopped", r.State, r.Execution))
		c.mu.Unlock()
		c.goStop(func() {
			c.conclude(context.WithoutCancel(ctx), x, newID("s-"), "restart observed an empty cohort", false)
		})
	case errors.Is(err, scopes.ErrCgroupAbsent):
		// The scope is gone (stopped from outside, or a stop whose
		// stopped revision was never written): its removal, once shown to
		// be this cgroup's, is the proof.
		c.mu.Lock()
		c.closeAdmissionLocked(fmt.Sprintf("found %s claim of execution %s whose scope is gone: proving its end from the removal now; recover once it is stopped", r.State, r.Execution))
		c.mu.Unlock()
		c.goStop(func() {
			c.conclude(context.WithoutCancel(ctx), x, newID("s-"), "restart found the cohort's cgroup gone; its removal is the evidence", false)
		})
	}
	return nil
}

// launch starts a new execution: reserve the claim, launch into a scope,
// record the incarnation, check what Pi loaded (K8), open admission.
// expectLeaf is the leaf a recovery's eligibility pinned ("" at first start).
func (c *Controller) launch(ctx context.Context, head sessionHead, keys claims.Keys, expectLeaf string) error {
	cv, err := c.settings()
	if err != nil {
		return err
	}
	spec, err := c.spec(ctx, cv)
	if err != nil {
		return err
	}
	// A working directory that is gone (the project moved, deleted,
	// unmounted) fails the held child's exec after the claim is reserved:
	// no process ever runs, and the uncertain claim left behind is one no
	// stop can prove. Refused before the claim is touched.
	if fi, err := os.Stat(spec.Dir); spec.Dir != "" && (err != nil || !fi.IsDir()) {
		return protocol.Refuse(protocol.CodeConfiguration,
			"the project %s, the engine's working directory, is not a directory (moved or deleted?): put it back, or add the conversation at its new place with `mosaicctl conv add --project DIR ...`; nothing was launched", spec.Dir)
	}
	execID := newID("e-")
	pins := pinsOf(cv, spec)
	written := ""
	if head.exists && !cv.IsClaude() {
		written = head.id
	}
	claim, err := c.cfg.Claims.Acquire(ctx, claims.Request{
		Keys: keys, Binding: newID("b-"), Harness: cv.Kind(), Conversation: cv.ID,
		Branch: "main", Leaf: head.leaf, Pins: pins, Execution: execID, Written: written,
	})
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.st.claim = claim
	c.st.written = written
	// The execution run before (stopped, its claim proven) is no longer
	// the one a stop or a command acts on: until this launch records its
	// own, none is, so a force stop of a launch that never released its
	// engine withdraws this claim instead of signalling the old scope.
	c.st.exec = nil
	c.st.binding = protocol.BindingLaunching
	c.closeAdmissionLocked("launching the engine")
	c.publishBindingLocked()
	c.mu.Unlock()
	if err := claim.BeginLaunch(ctx); err != nil {
		return err
	}
	res := resourcesOf(cv.Limits)
	// The claim records the incarnation, and the cohort is kept for a
	// restarted controller, before the held child may exec the engine: a
	// crash at any point leaves a claim that names what might run.
	activate := func(co scopes.Cohort) error {
		if err := c.saveCohort(co); err != nil {
			return err
		}
		if !cv.IsClaude() {
			if err := c.nameToolShell(cv, spec.Dirs, co.Confinement.ToolShell); err != nil {
				return err
			}
		}
		conf, err := json.Marshal(co.Confinement)
		if err != nil {
			return err
		}
		return claim.Activate(ctx, claims.Process{BootID: co.BootID, PID: co.PID, StartTime: co.StartTime, Cgroup: co.Cgroup, CgroupID: co.CgroupID, Confinement: string(conf)})
	}
	ro, writable, masked, unread := c.inputs()
	if unread != "" {
		c.audit(audit.Transition, nil, fmt.Sprintf("execution %s: the files these conversations give their engines are not read-only in this one, their settings did not load: %s", execID, unread),
			map[string]string{"EXECUTION": execID})
	}
	h, err := c.cfg.Scopes.Launch(ctx, scopes.Spec{
		Conversation: cv.ID, Execution: execID, Argv: spec.Args, Env: spec.Env, Dir: spec.Dir,
		Resources: res, Hide: append(c.hidden(), masked...), Keep: c.kept(), ReadOnly: ro, Writable: writable, Devices: cv.Devices, Dirs: spec.Dirs, Sealed: spec.Sealed, BeforeRelease: activate,
		Description: fmt.Sprintf("mosaic engine of conversation %s (execution %s)", cv.ID, execID),
	})
	if err != nil {
		claim.MarkUncertain(ctx, "launch failed after BeginLaunch: "+err.Error())
		// A launch that failed before the engine was released (no
		// incarnation recorded) is withdrawn once its scope is seen gone:
		// recover then launches again. One that recorded it may have run
		// the engine and needs a cohort proof.
		if werr := c.withdrawLaunch(ctx, claim, "launch failed: "+err.Error(), withdrawWait); werr == nil {
			return fmt.Errorf("launch execution %s: %w; the launch was withdrawn before its engine ran: fix the cause, then recover", execID, err)
		} else if !errors.Is(werr, errNotWithdrawable) {
			err = fmt.Errorf("%w (not withdrawn: %v)", err, werr)
		}
		c.setUncertain(fmt.Sprintf("launch of execution %s failed: %v", execID, err))
		return fmt.Errorf("launch execution %s: %w", execID, err)
	}
	co := h.Cohort
	x := &execution{id: execID, handle: h, pins: pins, engineName: engineNameOf(cv), stderr: c.readStderr(execID, h)}
	// What the launch pinned is what it vouches for until the session
	// watch checks more: a stop before that (a failed load check, then a
	// force stop) records these bytes, not none.
	if b := head.bytes(); b != nil || !head.exists {
		x.vouched.Store(fileState(b))
	}
	conn, err := c.openEngine(cv, h, c.driverOptions(execID))
	if err != nil {
		c.unopened(claim, x, err)
		return nil // the controller serves, uncertain, so a client can force stop
	}
	x.conn = conn
	c.bus.reset(execID)
	c.mu.Lock()
	c.st.exec = x
	c.mu.Unlock()
	c.keep(x) // before watchExit, which drops what keep stored
	if cv.IsClaude() {
		go c.watchDecisions(x, conn)
	}
	go c.pump(x)
	go c.watchExit(x)
	fields := map[string]string{"EXECUTION": execID, "SCOPE": co.Unit, "COHORT": string(co.Kind), "ENGINE_PID": fmt.Sprint(co.PID), "LIMITS": limitsText(cv.Limits)}
	confined := "confined"
	if why := unconfined(co); why != "" {
		confined = "UNCONFINED, so no stop of it can be proven: " + why
		fields["UNCONFINED"] = why
	}
	c.audit(audit.Launch, nil, fmt.Sprintf("launched execution %s in %s (%s, pid %d; limits %s; %s)", execID, co.Unit, co.Kind, co.PID, limitsText(cv.Limits), confined), fields)

	var sessionID, leaf string
	if cv.IsClaude() {
		sessionID, leaf, err = c.claudeLoadCheck(ctx, conn, cv, head, expectLeaf)
	} else {
		sessionID, leaf, err = c.loadCheck(ctx, x, head, expectLeaf)
		if err == nil {
			err = loadedUnchanged(cv.Session, head)
		}
	}
	if ts := conn.Turn(); err == nil && ts.Uncertain {
		// A line lost while launching would otherwise leave an active
		// binding that no prompt can pass.
		err = fmt.Errorf("engine output was lost during the load check: %s", strings.Join(ts.Reasons, "; "))
	}
	var end *protocol.EngineEnd
	if err != nil {
		end = c.engineEnd(x, err.Error())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		x.end = end
		c.st.binding = protocol.BindingUncertain
		c.st.preflight = err.Error()
		c.closeAdmissionLocked("preflight: " + err.Error())
		c.publishBindingLocked()
		c.audit(audit.Refusal, nil, "load check failed; admission stays closed: "+err.Error()+endSummary(end),
			endFields(end, map[string]string{"EXECUTION": execID, "REFUSAL": protocol.CodePreflight}))
		return nil // the controller serves, uncertain, so a client can force stop
	}
	c.st.sessionID, c.st.leaf = sessionID, leaf
	c.st.binding = protocol.BindingActive
	c.st.admission, c.st.reason = true, ""
	c.publishBindingLocked()
	if !cv.IsClaude() {
		go c.watchSession(x, head.snap)
	} else {
		// The watch starts from the bytes the launch checked, never a
		// read of its own: what a writer changed since is compared.
		go c.watchClaude(x, leaf, head.exists || cv.Claude.Adopted, head.transcript)
	}
	go c.watchIdle(x)
	return nil
}

// setUncertain closes admission for good and publishes it.
func (c *Controller) setUncertain(reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.st.binding = protocol.BindingUncertain
	c.closeAdmissionLocked(reason)
	c.publishBindingLocked()
}

// unopened records x, an execution whose engine runs (it was released,
// or a restart re-attached it) but whose pipes its driver did not take
// (err): the scope's handle is all this controller holds of it, and what
// a confirmed force stop kills and proves ended. Without x no execution
// was current and the force stop refused, naming a restart, while the
// engine ran on. The binding is uncertain, the claim marked so; nothing
// reads the engine's stream (no pump), and what reads x treats it as an
// engine found at restart (x.conn nil).
func (c *Controller) unopened(claim *claims.Claim, x *execution, err error) {
	why := fmt.Sprintf("the engine of execution %s runs, but its connection failed: %v; force stop to prove its cohort ended", x.id, err)
	c.bus.reset(x.id)
	c.mu.Lock()
	c.st.claim, c.st.exec = claim, x
	c.st.binding = protocol.BindingUncertain
	c.closeAdmissionLocked(why)
	c.markUncertainLocked(why)
	c.publishBindingLocked()
	c.mu.Unlock()
	go c.watchExit(x)
	c.audit(audit.Transition, nil, why, map[string]string{"EXECUTION": x.id, "STATE": protocol.BindingUncertain})
}

// startupTypes are the entries Pi appends by itself at start (sdk.js): a
// leaf that moved only through these is still the pinned leaf.
var startupTypes = map[string]bool{"model_change": true, "thinking_level_change": true}

// loadCheck is K8: before admission opens, what Pi loaded must be the
// pinned session and leaf. An existing session must come back with its
// header id and its last entry as leaf, allowing only Pi's own startup
// appends on top. A brand-new conversation pins what Pi reports, provided
// Pi holds nothing but startup entries and no other file appeared.
//
// It never asks for the whole session: get_entries since the pinned leaf
// returns only what Pi appended after it (its startup entries), however
// large the file. An unknown leaf is Pi's refusal, a failed check. Each
// command waits in proportion to the session file (pi.Budget): Pi
// answers only once it has loaded it.
func (c *Controller) loadCheck(ctx context.Context, x *execution, head sessionHead, expectLeaf string) (string, string, error) {
	var size int64
	if head.snap != nil {
		size = head.snap.Size()
	}
	budget := pi.Budget(c.cfg.CommandTimeout, size)
	p, err := probe(x, "get_state")
	if err != nil {
		return "", "", err
	}
	st, err := p.GetStateWithin(ctx, budget)
	if err != nil {
		return "", "", fmt.Errorf("get_state: %w", err)
	}
	if st.SessionFile != c.cfg.Conversation.Session {
		return "", "", fmt.Errorf("engine loaded %q, not the bound session file", st.SessionFile)
	}
	want := head.leaf
	if expectLeaf != "" {
		want = expectLeaf
	}
	since := want
	if !head.exists {
		since = ""
	}
	ents, err := p.GetEntriesWithin(ctx, since, budget)
	if err != nil {
		return "", "", fmt.Errorf("get_entries since %q: %w", since, err)
	}
	nodes, err := entryNodes(ents.Entries)
	if err != nil {
		return "", "", err
	}
	if !head.exists {
		for id, n := range nodes {
			if !startupTypes[n.typ] {
				return "", "", fmt.Errorf("new conversation, but the engine holds entry %s (%s)", id, n.typ)
			}
		}
		if now, err := readSessionHead(c.cfg.Conversation.Session); err == nil && now.exists && now.id != st.SessionID {
			return "", "", fmt.Errorf("a session file with header %s appeared; the engine reports %s", now.id, st.SessionID)
		}
		return st.SessionID, ents.LeafID, nil
	}
	if st.SessionID != head.id {
		return "", "", fmt.Errorf("engine loaded session %s, the file's header is %s", st.SessionID, head.id)
	}
	// Walk from Pi's leaf up through startup entries appended after the
	// pinned leaf to the pinned leaf itself.
	id := ents.LeafID
	for id != want {
		n, ok := nodes[id]
		if !ok || !startupTypes[n.typ] || head.has(id) {
			return "", "", fmt.Errorf("engine loaded leaf %s, the pinned leaf is %s", ents.LeafID, want)
		}
		id = n.parent
	}
	return st.SessionID, ents.LeafID, nil
}

// loadedUnchanged checks, once Pi answered the load check (so it has read
// its session file), that the file still begins with exactly the bytes
// head read, on the same inode: what the wake and recover checked against
// the stop's vouched bytes, and what the load check compared the engine's
// leaf with. A writer that rewrites an entry in place between that read
// and Pi's keeps the header and the leaf, so only the bytes show it; the
// session watch would see it too, but only at its first poll, after a
// client's prompt could have sent the forged history to the model.
// Appends (Pi's own startup entries) are the watch's to judge.
func loadedUnchanged(path string, head sessionHead) error {
	if head.snap == nil || head.snap.New() {
		return nil // no bytes were pinned; the load check compares the header
	}
	if _, err := history.Follow(path, head.snap, history.Options{}); err != nil {
		return fmt.Errorf("the session file changed while the engine loaded it (another writer): %w", err)
	}
	return nil
}

type treeNode struct {
	parent string
	typ    string
}

// entryNodes reads get_entries' entries into id -> node.
func entryNodes(raw []json.RawMessage) (map[string]treeNode, error) {
	out := make(map[string]treeNode, len(raw))
	for _, r := range raw {
		var e struct {
			ID       string  `json:"id"`
			ParentID *string `json:"parentId"`
			Type     string  `json:"type"`
		}
		if err := json.Unmarshal(r, &e); err != nil {
			return nil, fmt.Errorf("get_entries: %w", err)
		}
		p := ""
		if e.ParentID != nil {
			p = *e.ParentID
		}
		out[e.ID] = treeNode{parent: p, typ: e.Type}
	}
	return out, nil
}

// unconfined says why co's engine runs without confinement, "" when it
// is confined. Clients show it from the launch on: the stop that ends
// uncertain for it should not be the first word of it.
func unconfined(co scopes.Cohort) string {
	if co.Confinement.Confined {
		return ""
	}
	return cmp.Or(co.Confinement.Reason, "no confinement was recorded for it")
}
