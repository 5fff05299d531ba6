package proofs

import (
	"cmp"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/mosaic-agents/mosaic/internal/shape"
)

// Proof type names, the `type` field of the JSON form.
const (
	TypeCohort = "cohort"
	TypeBoot   = "boot"
)

// Version is the format version of boot proofs, and of cohort proofs
// written before engines were confined (those decode, but never verify:
// their confinement check fails).
const Version = 1

// CohortVersion is the format version of the cohort proofs this package
// writes: Version plus the confinement evidence.
const CohortVersion = 2

// CohortProof is the evidence that one engine's whole cohort is gone, on
// one of two bases: complete membership of its scope's cgroup, the death
// of each member, and then the cgroup observed present and empty
// (BasisEmptyObserved); or the cgroup observed removed, with the death of
// every member known by pid (BasisCgroupRemoved); in both, the engine
// shown confined (Confinement). Build it with
// NewCohortProof; a literal is never trusted, Verify checks everything
// again.
type CohortProof struct {
	Type          string   `json:"type"`
	Version       int      `json:"version"`
	Stop          string   `json:"stop"`
	Conversation  string   `json:"conversation"`
	Execution     string   `json:"execution"`
	Unit          string   `json:"unit"`
	InvocationID  string   `json:"invocation_id"`
	Cgroup        string   `json:"cgroup"`
	BootID        string   `json:"boot_id"`
	ClockTicks    uint64   `json:"clock_ticks"`
	Members       []Member `json:"members"`
	ObservedAt    uint64   `json:"observed_at_ns"`
	ObservedWall  string   `json:"observed_wall"`
	CgroupPresent bool     `json:"cgroup_present"`
	Populated     int      `json:"populated"`
	ActiveState   string   `json:"active_state"`
	Result        string   `json:"result"`
	// Confinement is absent only in a version 1 proof.
	Confinement *Confinement `json:"confinement,omitempty"`

	// What the proof rests on (see removal.go). Omitted in proofs written
	// before bases existed, which are held to the empty-observed checks.
	Basis    Basis    `json:"basis,omitempty"`
	CgroupID uint64   `json:"cgroup_id,omitempty"` // the cohort cgroup's kernel id, recorded at launch
	Removal  *Removal `json:"removal,omitempty"`   // only with BasisCgroupRemoved

	Digest string `json:"digest,omitempty"`
}

// Member is one process of the cohort with its observed death.
type Member struct {
	PID       int    `json:"pid"`
	StartTime uint64 `json:"start_time"` // clock ticks since boot
	Comm      string `json:"comm"`
	DiedAt    uint64 `json:"died_at_ns"` // CLOCK_BOOTTIME ns
}

// NewCohortProof builds a proof from an observation, or refuses with every
// reason it does not hold (errors joined; test with errors.Is against the
// Err* values). A refusal means the stop stays `stopping` or becomes
// `uncertain`; it never means `stopped`.
func NewCohortProof(obs Observation) (*CohortProof, error) {
	var errs []error
	if obs.Kind != KindScope {
		errs = append(errs, fmt.Errorf("observation kind %q: %w", obs.Kind, ErrProcessGroup))
	}
	if obs.Basis == "" {
		obs.Basis = BasisEmptyObserved
	}
	switch obs.Basis {
	case BasisEmptyObserved:
		if !obs.MembershipComplete {
			errs = append(errs, ErrIncompleteMembership)
		}
		if !obs.CgroupPresent {
			errs = append(errs, fmt.Errorf("cgroup %q: %w", obs.Cgroup, ErrCgroupAbsent))
		}
	case BasisCgroupRemoved:
		// The kernel emptied the cgroup before it went: no enumeration is
		// needed, only that it is this cgroup that went (checkRemoval).
		if obs.Removal == nil {
			errs = append(errs, fmt.Errorf("cgroup %q: no removal evidence: %w", obs.Cgroup, ErrCgroupAbsent))
		}
	}
	if ok, why := obs.Confinement.Holds(obs.Cgroup); !ok {
		errs = append(errs, fmt.Errorf("%s: %w", why, ErrUnconfined))
	}
	for _, m := range obs.Members {
		if !m.Died {
			errs = append(errs, fmt.Errorf("pid %d (%s) start %d: %w", m.PID, m.Comm, m.StartTime, ErrDeathUnobserved))
		}
	}
	p := &CohortProof{
		Type:          TypeCohort,
		Version:       CohortVersion,
		Stop:          obs.Stop,
		Conversation:  obs.Conversation,
		Execution:     obs.Execution,
		Unit:          obs.Unit,
		InvocationID:  obs.InvocationID,
		Cgroup:        obs.Cgroup,
		BootID:        obs.BootID,
		ClockTicks:    obs.ClockTicks,
		Members:       make([]Member, 0, len(obs.Members)),
		ObservedAt:    obs.ObservedAt,
		ObservedWall:  formatWall(obs.ObservedWall),
		CgroupPresent: obs.CgroupPresent,
		Populated:     obs.Populated,
		ActiveState:   obs.ActiveState,
		Result:        obs.Result,
		Basis:         obs.Basis,
		CgroupID:      obs.CgroupID,
		Removal:       obs.Removal,
	}
	conf := obs.Confinement
	conf.Namespaces = slices.Clone(conf.Namespaces)
	conf.Masked = slices.Clone(conf.Masked)
	conf.Scoped = slices.Clone(conf.Scoped)
	if conf.Namespaces == nil {
		conf.Namespaces = []Namespace{}
	}
	if conf.Masked == nil {
		conf.Masked = []string{}
	}
	p.Confinement = &conf
	for _, m := range obs.Members {
		p.Members = append(p.Members, Member{PID: m.PID, StartTime: m.StartTime, Comm: m.Comm, DiedAt: m.DiedAt})
	}
	slices.SortFunc(p.Members, func(a, b Member) int {
		return cmp.Or(cmp.Compare(a.PID, b.PID), cmp.Compare(a.StartTime, b.StartTime))
	})
	var cs checks
	checkCohort(&cs, p)
	for _, c := range cs {
		if !c.OK && (c.Name != "cgroup-empty" || obs.CgroupPresent) && c.Name != "confinement" && (c.Name != "basis" || obs.Removal != nil) {
			errs = append(errs, fmt.Errorf("%s: %s: %w", c.Name, c.Detail, c.err))
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("no cohort proof for %s: %w", obs.Unit, errors.Join(errs...))
	}
	d, err := digest(p)
	if err != nil {
		return nil, err
	}
	p.Digest = d
	return p, nil
}

// checkCohort adds every offline check of a cohort proof except the
// digest, which needs the encoded bytes.
func checkCohort(cs *checks, p *CohortProof) {
	cs.add("type", p.Type == TypeCohort && (p.Version == Version && p.Confinement == nil || p.Version == CohortVersion && p.Confinement != nil),
		ErrMalformed, "type %q version %d (1 without confinement evidence, %d with it)", p.Type, p.Version, CohortVersion)
	cs.add("identity", p.Stop != "" && p.Conversation != "" && p.Execution != "", ErrMalformed,
		"stop %q conversation %q execution %q", p.Stop, p.Conversation, p.Execution)
	checkUnit(cs, p)
	cs.add("invocation-id", shape.Hex(p.InvocationID, 32), ErrMalformed,
		"invocation id %q is 32 lowercase hex", p.InvocationID)
	cs.add("cgroup", cohortCgroup(p.Cgroup, p.Unit), ErrMalformed,
		"cgroup %q is the unit's cgroup or its %q sub-cgroup", p.Cgroup, EngineSubgroup)
	cs.add("boot-id", ValidBootID(p.BootID), ErrMalformed, "boot id %q is a lowercase UUID", p.BootID)
	cs.add("clock-ticks", p.ClockTicks > 0 && p.ClockTicks <= 1_000_000_000, ErrMalformed,
		"clock ticks %d per second", p.ClockTicks)
	checkMembers(cs, p)
	checkBasis(cs, p)
	cs.add("unit-state", p.ActiveState == "inactive" || p.ActiveState == "failed", ErrUnitActive,
		"active state %q result %q", p.ActiveState, p.Result)
	checkConfinement(cs, p)
}

// checkUnit checks that the unit is the scope named by the proof's own
// conversation and execution (EngineUnit), so neither id can be edited to
// another's without the unit, and with it the cgroup, no longer matching.
func checkUnit(cs *checks, p *CohortProof) {
	want, err := EngineUnit(p.Conversation, p.Execution)
	if err != nil {
		cs.add("unit", false, ErrMalformed, "unit %q: %v", p.Unit, err)
		return
	}
	cs.add("unit", validScopeName(p.Unit) && p.Unit == want, ErrMalformed,
		"unit %q is the scope of conversation %q execution %q (%q)", p.Unit, p.Conversation, p.Execution, want)
}

func emptySentinel(p *CohortProof) error {
	if !p.CgroupPresent {
		return ErrCgroupAbsent
	}
	return ErrCgroupPopulated
}

// checkMembers checks each member's identity, that each death follows its
// start, and that the observation follows every death.
func checkMembers(cs *checks, p *CohortProof) {
	if p.Members == nil {
		cs.add("members", false, ErrMalformed, "membership missing (null)")
		return
	}
	seen := map[[2]uint64]bool{}
	okIdent, okStart, okObs := true, true, true
	var bad []string
	for _, m := range p.Members {
		id := [2]uint64{uint64(m.PID), m.StartTime}
		if m.PID <= 0 || m.Comm == "" || seen[id] {
			okIdent = false
			bad = append(bad, fmt.Sprintf("pid %d start %d comm %q", m.PID, m.StartTime, m.Comm))
		}
		seen[id] = true
		if p.ClockTicks == 0 || m.DiedAt < ticksToNanos(m.StartTime, p.ClockTicks) {
			okStart = false
		}
		if p.ObservedAt < m.DiedAt {
			okObs = false
		}
	}
	if okIdent {
		cs.add("members", true, ErrMalformed, "%d members, each with pid, start time and comm, no duplicate", len(p.Members))
	} else {
		cs.add("members", false, ErrMalformed, "%d members; without pid, start time or comm, or listed twice: %s",
			len(p.Members), strings.Join(bad, "; "))
	}
	cs.add("deaths-after-start", okStart, ErrDeathBeforeStart,
		"every member died at or after its start (tick resolution)")
	cs.add("observed-after-deaths", okObs, ErrObservedBeforeDeath,
		"observation at %d ns follows every death", p.ObservedAt)
}

// EngineSubgroup is the sub-cgroup of a delegated scope that holds the
// engine and its descendants while an anchor process in a sibling keeps
// the unit alive (see package scopes): the cohort is then
// <unit cgroup>/engine.
const EngineSubgroup = "engine"

// cohortCgroup accepts an absolute, clean cgroup path that is the unit's
// own cgroup or its engine sub-cgroup.
func cohortCgroup(cg, unit string) bool {
	if !strings.HasPrefix(cg, "/") || path.Clean(cg) != cg {
		return false
	}
	if path.Base(cg) == unit {
		return true
	}
	return path.Base(cg) == EngineSubgroup && path.Base(path.Dir(cg)) == unit
}

// ticksToNanos converts a /proc start time to CLOCK_BOOTTIME nanoseconds,
// saturating instead of overflowing.
func ticksToNanos(t, hz uint64) uint64 {
	if hz == 0 {
		return ^uint64(0)
	}
	sec, rem := t/hz, t%hz
	if sec > (^uint64(0))/1_000_000_000-1 {
		return ^uint64(0)
	}
	return sec*1_000_000_000 + rem*1_000_000_000/hz
}

// validScopeName accepts a plain unit file name ending in .scope: no path
// separators, no leading dot, printable ASCII only.
func validScopeName(u string) bool {
	if !strings.HasSuffix(u, ".scope") || len(u) <= len(".scope") || len(u) > 255 || u[0] == '.' {
		return false
	}
	for _, r := range u {
		if r <= ' ' || r > '~' || r == '/' {
			return false
		}
	}
	return true
}

func formatWall(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}
