package scopes

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

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
	root, err := nsPIDs(c.PID)
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
		ns, err := nsPIDs(pid)
		if err == nil && len(ns) > level && ns[level] == nsPID {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("pid %d of %s: %w", nsPID, c.Unit, ErrNoSuchMember)
}

// nsPIDs reads the NSpid line of /proc/<pid>/status: the process's pid in
// each pid namespace from this /proc's down to its own.
func nsPIDs(pid int) ([]int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return nil, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, "NSpid:")
		if !ok {
			continue
		}
		var out []int
		for f := range strings.FieldsSeq(rest) {
			n, err := strconv.Atoi(f)
			if err != nil {
				return nil, fmt.Errorf("NSpid %q: %w", rest, err)
			}
			out = append(out, n)
		}
		return out, nil
	}
	return nil, fmt.Errorf("/proc/%d/status has no NSpid line", pid)
}
