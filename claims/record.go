package claims

import (
	"encoding/json"
	"fmt"
)

// State is a claim's lifecycle state. Only `stopped` with a verified proof
// frees the keys; every other state holds them.
type State string

const (
	Reserved  State = "reserved"  // keys taken, no engine released yet
	Active    State = "active"    // an engine incarnation is recorded
	Stopping  State = "stopping"  // a stop is in progress
	Uncertain State = "uncertain" // the engine may be alive; nothing may replace it
	Stopped   State = "stopped"   // a verified proof says the cohort is gone
)

func (s State) valid() bool {
	switch s {
	case Reserved, Active, Stopping, Uncertain, Stopped:
		return true
	}
	return false
}

// Pins are the configuration an engine was launched with. A resume must
// present the same pins (brief W8/W9).
type Pins struct {
	EngineVersion string `json:"engine_version"`
	BinarySHA256  string `json:"binary_sha256"`
	ArgvDigest    string `json:"argv_digest"`
}

// Process identifies one process across pid reuse: boot id, pid and start
// time (field 22 of /proc/<pid>/stat), plus its cgroup when known.
type Process struct {
	BootID    string `json:"boot_id"`
	PID       int    `json:"pid"`
	StartTime uint64 `json:"start_time"`
	Cgroup    string `json:"cgroup,omitempty"`
	// CgroupID is the kernel id of Cgroup (its directory's inode), when
	// recorded: a cohort proof must then name the same cgroup id, so a
	// cgroup re-created at the same path can never stand in for it.
	CgroupID uint64 `json:"cgroup_id,omitempty"`
	// Confinement is the engine's confinement evidence as the launcher
	// recorded it (proofs.Confinement as compact JSON, a string so Process
	// stays comparable), so a cohort rebuilt from the claim alone, when
	// its cohort record is lost, can still prove a stop.
	Confinement string `json:"confinement,omitempty"`
}

// ProofRecord is the proof that allowed `stopped`, stored whole so the
// revision can be re-verified offline.
type ProofRecord struct {
	Type   string          `json:"type"`   // cohort, boot or unlaunched
	Digest string          `json:"digest"` // lowercase hex SHA-256
	Body   json.RawMessage `json:"body"`   // canonical JSON of the proof
}

// Record is one revision of a claim, as stored under one key. The same
// claim revision is stored under both keys; only KeyKind and Revision
// differ between the two copies.
type Record struct {
	Format   int    `json:"format"`
	KeyKind  string `json:"key_kind"` // seat or session: the directory it lives in
	Revision uint64 `json:"revision"` // the r<10 digits> of its file name

	Claim string  `json:"claim"` // minted at acquire; stable across resumes
	Seq   uint64  `json:"seq"`   // the claim's own revision, equal under both keys
	Seat  SeatKey `json:"seat"`
	// Session is the native session identity.
	Session string `json:"session"`

	Binding      string `json:"binding"`
	Harness      string `json:"harness"`
	Conversation string `json:"conversation"`
	Branch       string `json:"branch"`
	Leaf         string `json:"leaf"`
	Pins         Pins   `json:"pins"`
	// Written is the Pi header id of the session file seen at the session
	// path while the claim held it: the file the launch found, or the one
	// the engine wrote (Pi writes lazily, after the first answer). Once
	// set, a revision that saw no file keeps it; one that saw the
	// engine's file records that (the session watch takes a header
	// naming another session for another writer's). It is the evidence a claim keyed
	// new:<conversation> carries that a session exists: without it a
	// missing file reads as a conversation never answered, and a recover
	// would start a new, empty session over history that exists elsewhere.
	Written string `json:"written,omitempty"`
	// Vouched is what the session file held as the controller last
	// vouched for it (its session watch checked every entry against the
	// engine's own), recorded on a stopped revision: the wake launches
	// only on exactly these bytes, and a recover names (or refuses) a
	// file that no longer begins with them. Nil means not recorded (a
	// revision of an older mosaic, a stop concluded by a controller that
	// never watched the file, a Claude transcript): the file is then
	// checked by its header and leaf alone, as before. Only the stopped
	// revision that records it keeps it (advance drops it), so a later
	// execution's stop never carries an earlier one's bytes. An active
	// revision has it only from Handover: what a controller restarting
	// hands to the next one, which Reattach takes (Handed) and drops.
	Vouched *FileState `json:"vouched,omitempty"`
	// Announced is what a restarting controller's engine connection
	// announced last (Handover, with Vouched): the frames it read and the
	// prompts it sent, whose lines may land after the restart. Only on a
	// Handover's active revision; advance drops it.
	Announced []Announcement `json:"announced,omitempty"`

	// Execution names the engine execution this revision is about; the
	// scope unit is mosaic-engine-<conversation>-<execution>.scope.
	Execution string `json:"execution"`
	// Launcher is the controller that called BeginLaunch, before it asked
	// the launcher to start anything: from then on an engine may exist
	// while its incarnation is not yet recorded, so the reservation is no
	// longer releasable as unlaunched.
	Launcher *Process `json:"launcher"`
	// Engine is the execution incarnation, nil until Activate.
	Engine *Process `json:"engine"`
	// Controller is the process that wrote this revision.
	Controller Process `json:"controller"`
	Generation uint64  `json:"generation"`

	State  State        `json:"state"`
	Reason string       `json:"reason,omitempty"`
	Proof  *ProofRecord `json:"proof"`
	// Policy names the policy that made a stopped revision (PolicyHibernate);
	// empty for a stop someone asked for. Each revision sets it anew.
	Policy string `json:"policy,omitempty"`
}

// FileState names a session file's bytes up to its last LF: their
// length and their SHA-256 (lowercase hex), as history.Snapshot's Size
// and Digest give them.
type FileState struct {
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

const formatVersion = 1

// sameRevision reports whether a and b are the same claim revision, stored
// under any key.
func sameRevision(a, b Record) bool {
	a.KeyKind, a.Revision, b.KeyKind, b.Revision = "", 0, "", 0
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}

// check validates a record read from revision rev of a key directory.
func (r *Record) check(kind, hash string, rev uint64) error {
	switch {
	case r.Format != formatVersion:
		return fmt.Errorf("format %d", r.Format)
	case r.KeyKind != kind:
		return fmt.Errorf("key kind %q in a %s directory", r.KeyKind, kind)
	case r.Revision != rev:
		return fmt.Errorf("revision %d in file r%010d", r.Revision, rev)
	case kind == kindSeat && seatHash(r.Seat) != hash, kind == kindSession && sessionHash(r.Session) != hash:
		return fmt.Errorf("key does not match its directory")
	case (Keys{Seat: r.Seat, Session: r.Session}).validate() != nil:
		return fmt.Errorf("invalid key")
	case r.Claim == "" || r.Seq == 0 || r.Generation == 0:
		return fmt.Errorf("missing claim, seq or generation")
	case !r.State.valid():
		return fmt.Errorf("state %q", r.State)
	case r.State == Active && r.Engine == nil, r.State == Stopping && r.Engine == nil && r.Launcher == nil:
		return fmt.Errorf("%s without an engine incarnation", r.State)
	case r.State == Stopped && r.Proof == nil:
		return fmt.Errorf("stopped without a proof reference")
	case r.State != Stopped && r.Proof != nil:
		return fmt.Errorf("proof on a %s revision", r.State)
	}
	return nil
}
