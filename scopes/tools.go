package scopes

import (
	"cmp"
	"errors"
	"slices"

	"github.com/mosaic-agents/mosaic/internal/procfs"
	"github.com/mosaic-agents/mosaic/proofs"
)

// ToolProcesses counts the members of the cohort that are not the engine
// itself: what the agent's tools started, and what those left running
// (a setsid child included, since it stays in the cgroup). The engine is
// the recorded pid and, when it is confined (the recorded pid is the held
// child, PID 1 of the engine's namespace), the one child that process
// forked. Every orphan of the namespace becomes the held child's child
// too (a tool's setsid child whose shell exited): the engine is the
// earliest of them, since the held child forks it before anything else
// of the namespace runs, and children tied with it at the start time's
// clock tick all count as tools. A member that cannot be read counts as a
// tool process: the idle policy must never take an unknown process for
// the engine.
func (h *Handle) ToolProcesses() (int, error) {
	c := h.Cohort
	if c.Kind != proofs.KindScope {
		return 0, errors.New(PGroupReason)
	}
	ms, err := h.Members()
	if err != nil {
		return 0, err
	}
	n := 0
	var children []Member // the held child's
	for _, m := range ms {
		if m.PID == c.PID {
			continue
		}
		if c.Confinement.Confined {
			if st, err := procfs.ReadStat(m.PID); err == nil && st.PPID == c.PID {
				children = append(children, m)
				continue
			}
		}
		n++
	}
	n += len(children)
	if len(children) > 0 {
		first := slices.MinFunc(children, func(a, b Member) int { return cmp.Compare(a.StartTime, b.StartTime) })
		if slices.IndexFunc(children, func(m Member) bool { return m.StartTime == first.StartTime && m.PID != first.PID }) < 0 {
			n-- // the engine
		}
	}
	return n, nil
}
