package scopes

import (
	"errors"
	"fmt"

	"github.com/mosaic-agents/mosaic/internal/procfs"
	"github.com/mosaic-agents/mosaic/proofs"
)

// ErrNoSuchMember: no live member of the cohort has that pid in the
// engine's pid namespace.
var ErrNoSuchMember = errors.New("no member of the cohort has that pid inside its pid namespace")

// HostPID returns the pid, as this process sees it, of the cohort's member
// whose pid in the engine's own pid namespace is nsPID: what the engine and
// its tools see and print ($$, $!). For an unconfined cohort (no pid
// namespace of its own) it returns nsPID.
func (h *Handle) HostPID(nsPID int) (int, error) {
	c := h.Cohort
	if c.Kind != proofs.KindScope || !c.Confinement.Confined {
		return nsPID, nil
	}
	// The held child is PID 1 one level below this process's view: its
	// NSpid line gives the level the engine's pids are at.
	root, err := procfs.NSpid(c.PID)
	if err != nil {
		return 0, fmt.Errorf("pid namespace of cohort %s: %w", c.Unit, err)
	}
	level := len(root) - 1
	fs, err := h.m.cgroupFS()
	if err != nil {
		return 0, err
	}
	pids, err := fs.procs(c.Cgroup)
	if err != nil {
		return 0, err
	}
	for _, pid := range pids {
		ns, err := procfs.NSpid(pid)
		if err == nil && len(ns) > level && ns[level] == nsPID {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("pid %d of %s: %w", nsPID, c.Unit, ErrNoSuchMember)
}
