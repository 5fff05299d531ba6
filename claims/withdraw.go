package claims

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mosaic-agents/mosaic/proofs"
	"github.com/mosaic-agents/mosaic/protocol"
)

// ProofWithdrawn is the proof type of a launch withdrawn before its engine
// was released: the claim records no incarnation and the user manager
// showed the execution's scope unit not alive. It is not a cohort proof:
// nothing was enumerated or killed, and `proof verify` and `audit` name it
// for what it is.
const ProofWithdrawn = "withdrawn"

// UnitObservation is what the user manager said about one scope unit, as
// the caller read it over D-Bus (ListUnitsByNames): a unit it does not
// know reads LoadState "not-found".
type UnitObservation struct {
	Unit        string    `json:"unit"`
	LoadState   string    `json:"load_state"`
	ActiveState string    `json:"active_state"`
	BootID      string    `json:"boot_id"`     // the boot the observation was made in
	ObservedAt  time.Time `json:"observed_at"` // for people only
}

// Dead reports whether the observation shows a unit that holds no process:
// inactive or failed (a failed scope had its processes killed; a unit the
// manager does not know reads not-found and inactive). The load state
// decides nothing: a running scope whose transient unit file was removed
// and the manager reloaded reads not-found and still active. Anything else
// (active, activating, deactivating, reloading, or a state this code does
// not know) may hold one.
func (o UnitObservation) Dead() bool {
	return o.Unit != "" && (o.ActiveState == "inactive" || o.ActiveState == "failed")
}

// withdrawnProof is the body of a ProofWithdrawn proof record. It says
// exactly what was observed: the claim revision had no incarnation, the
// launcher (gone, or the withdrawing controller itself), and the unit's
// state.
type withdrawnProof struct {
	Type      string          `json:"type"`
	Basis     string          `json:"basis"` // always basisNoIncarnation
	Claim     string          `json:"claim"`
	Seq       uint64          `json:"seq"` // the revision it withdraws
	Execution string          `json:"execution"`
	Launcher  Process         `json:"launcher"`
	Unit      UnitObservation `json:"unit"`
	Reason    string          `json:"reason"`
}

// basisNoIncarnation: the launcher records the incarnation (Activate)
// before it lets the held child exec the engine, so a launch whose claim
// never recorded one never ran agent code.
const basisNoIncarnation = "no-incarnation"

// Withdraw ends a launch that failed before its engine was released:
// reserved, uncertain or stopping -> stopped with a ProofWithdrawn proof.
// It refuses claim-state unless all of these hold, each read from the
// claim store or the observation, never assumed:
//
//   - the launch began (Launcher) and recorded no incarnation (Engine nil),
//     so the held child was never told to run the engine;
//   - the launcher is this process or gone, so no launch is under way that
//     could still create the scope;
//   - obs names the execution's scope unit (unit, which must be the name
//     the launcher gives it, derived here from the revision's conversation
//     and execution), was made in the launcher's boot, and shows it
//     inactive or failed.
//
// A claim with an incarnation needs a cohort or boot proof (Stop); one
// without a launch, Abandon.
func (c *Claim) Withdraw(ctx context.Context, unit string, obs UnitObservation, reason string) error {
	self, err := c.s.host.Self()
	if err != nil {
		return protocol.Wrap(protocol.CodeClaimStore, err, "withdraw: identify controller")
	}
	return c.advance(ctx, "withdraw", []State{Reserved, Uncertain, Stopping}, func(r *Record) error {
		if err := c.withdrawable(r, self, unit, obs); err != nil {
			return err
		}
		pr, err := newWithdrawnRecord(c.prev(r), obs, reason)
		if err != nil {
			return err
		}
		r.State, r.Proof, r.Reason = Stopped, pr, reason
		return proven(r)
	})
}

// withdrawable checks Withdraw's conditions against the current revision.
func (c *Claim) withdrawable(r *Record, self Process, unit string, obs UnitObservation) error {
	switch {
	case r.Engine != nil:
		return errState(r, "withdraw after the engine incarnation was recorded (the engine may have run; a cohort proof is needed)")
	case r.Launcher == nil:
		return errState(r, "withdraw before a launch began (abandon it)")
	case !isScopeOf(r, unit) || obs.Unit != unit:
		return protocol.Refuse(protocol.CodeStopProof, "withdraw: the observation is of unit %q, not the scope %q of execution %s", obs.Unit, unit, r.Execution)
	case obs.BootID != r.Launcher.BootID:
		return protocol.Refuse(protocol.CodeStopProof, "withdraw: unit %s observed in boot %s, the launch ran in boot %s", unit, obs.BootID, r.Launcher.BootID)
	case !obs.Dead():
		return protocol.Refuse(protocol.CodeStopProof, "withdraw: the user manager shows %s %s/%s: it may hold processes of the launch; stop it first", unit, obs.LoadState, obs.ActiveState)
	}
	if *r.Launcher == self {
		return nil
	}
	gone, err := c.s.gone(*r.Launcher)
	if err != nil {
		return protocol.Wrap(protocol.CodeClaimStore, err, "withdraw: is launcher %d alive", r.Launcher.PID)
	}
	if !gone {
		return protocol.Refuse(protocol.CodeAlreadyActive, "withdraw: launcher pid %d of execution %s still runs; its launch may be under way", r.Launcher.PID, r.Execution)
	}
	return nil
}

// isScopeOf reports whether unit is the scope unit the launcher gives
// rec's execution: the name is derived from the revision's own ids here,
// never taken from the caller or the record's body, so an observation of
// any other unit (dead or not) withdraws nothing.
func isScopeOf(rec *Record, unit string) bool {
	want, err := proofs.EngineUnit(rec.Conversation, rec.Execution)
	return err == nil && unit == want
}

// LaunchOver reports whether no launch of the current revision can still
// be under way: it began, and its launcher is this process (whose launch
// has returned) or is gone. Only then may a caller stop the execution's
// scope before Withdraw: a live launcher could still be releasing into it.
func (c *Claim) LaunchOver() (bool, error) {
	r := c.rec
	if r.Launcher == nil {
		return false, nil
	}
	self, err := c.s.host.Self()
	if err != nil {
		return false, err
	}
	if *r.Launcher == self {
		return true, nil
	}
	return c.s.gone(*r.Launcher)
}

func newWithdrawnRecord(rec *Record, obs UnitObservation, reason string) (*ProofRecord, error) {
	obs.ObservedAt = obs.ObservedAt.UTC()
	body, err := proofs.Canonical(withdrawnProof{
		Type: ProofWithdrawn, Basis: basisNoIncarnation, Claim: rec.Claim, Seq: rec.Seq, Execution: rec.Execution,
		Launcher: *rec.Launcher, Unit: obs, Reason: reason,
	})
	if err != nil {
		return nil, err
	}
	return &ProofRecord{Type: ProofWithdrawn, Digest: sum(body), Body: body}, nil
}

// provenWithdrawn re-checks a ProofWithdrawn record against its revision:
// the revision still has no incarnation, the proof is about it and its
// launcher, and the observation shows the unit dead in the launcher's boot.
func provenWithdrawn(rec *Record) error {
	pr := rec.Proof
	var w withdrawnProof
	dec := json.NewDecoder(bytes.NewReader(pr.Body))
	dec.DisallowUnknownFields()
	switch {
	case dec.Decode(&w) != nil:
		return fmt.Errorf("withdrawn proof undecodable: %w", proofs.ErrMalformed)
	case sum(pr.Body) != pr.Digest:
		return fmt.Errorf("withdrawn proof: %w", proofs.ErrDigest)
	case rec.Engine != nil || rec.Launcher == nil:
		return fmt.Errorf("withdrawn proof on a claim with an engine incarnation or without a launch: %w", proofs.ErrMalformed)
	case w.Type != ProofWithdrawn || w.Basis != basisNoIncarnation || w.Claim != rec.Claim || w.Seq+1 != rec.Seq ||
		w.Execution != rec.Execution || w.Launcher != *rec.Launcher:
		return fmt.Errorf("withdrawn proof is about another claim revision: %w", proofs.ErrMalformed)
	case !isScopeOf(rec, w.Unit.Unit):
		return fmt.Errorf("withdrawn proof observed unit %q, not the scope of execution %s: %w", w.Unit.Unit, rec.Execution, proofs.ErrMalformed)
	case w.Unit.BootID != rec.Launcher.BootID || !w.Unit.Dead():
		return fmt.Errorf("withdrawn proof does not show the scope %s dead in the launch's boot: %w", w.Unit.Unit, proofs.ErrMalformed)
	}
	return nil
}

// WithdrawnSummary describes a ProofWithdrawn record for people (status,
// audit): what was observed, and that it is no cohort proof.
func WithdrawnSummary(pr *ProofRecord) (string, error) {
	if pr == nil || pr.Type != ProofWithdrawn {
		return "", fmt.Errorf("not a withdrawn proof: %w", proofs.ErrUnknownType)
	}
	var w withdrawnProof
	if err := json.Unmarshal(pr.Body, &w); err != nil {
		return "", fmt.Errorf("withdrawn proof undecodable: %w", proofs.ErrMalformed)
	}
	return fmt.Sprintf("launch withdrawn, no cohort proof: execution %s recorded no engine incarnation (never released) and the user manager showed %s %s/%s at %s",
		w.Execution, w.Unit.Unit, w.Unit.LoadState, w.Unit.ActiveState, w.Unit.ObservedAt.Format(time.RFC3339)), nil
}
