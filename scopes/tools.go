package scopes

import (
	"errors"

	"github.com/mosaic-agents/mosaic/internal/procfs"
	"github.com/mosaic-agents/mosaic/proofs"
)

// ToolProcesses counts the members of the cohort that are not the engine
// itself: what the agent's tools started, and what those left running
// (a setsid child included, since it stays in the cgroup). The engine is
// the recorded pid and, when it is confined (the recorded pid is the held
// child, PID 1 of the engine's namespace), that process's children. A
// member that cannot be read counts as a tool process: the idle policy
// must never take an unknown process for the engine.
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
	for _, m := range ms {
		if m.PID == c.PID {
			continue
		}
		if c.Confinement.Confined {
			if st, err := procfs.ReadStat(m.PID); err == nil && st.PPID == c.PID {
				continue
			}
		}
		n++
	}
	return n, nil
}
