package activation

import (
	"fmt"
	"strings"

	"github.com/mosaic-agents/mosaic/internal/procfs"
)

// EngineScopePrefix starts the name of every engine scope unit
// (scopes.UnitName: mosaic-engine-<conversation>-<execution>.scope). A
// process in a cgroup below such a scope is an agent's tool.
const EngineScopePrefix = "mosaic-engine-"

// maxAncestry bounds the walk up a peer's parents; a deeper chain is not
// believed.
const maxAncestry = 128

// Verdict is what a Judge concluded about a peer.
type Verdict struct {
	// Engine is true for a peer that may observe but never control: one
	// inside an engine scope, one descended from a process that is, one in
	// another pid or user namespace, and one that could not be read.
	Engine bool
	// Reason says why, for the refusal and the journal.
	Reason string
}

// Judge tells engine peers from the local operator. It compares a peer's
// namespaces with those of the process that made the Judge (the
// controller), so make it where the controller runs.
type Judge struct {
	self   namespaces
	places places // where the cgroups lie, as the last look found them
}

// namespaces identifies a process's pid and user namespaces by the nsfs
// device and inode of /proc/<pid>/ns/{pid,user}.
type namespaces struct {
	pid, user procfs.NS
}

// NewJudge reads this process's own namespaces.
func NewJudge() (*Judge, error) {
	ns, err := namespacesOf(procfs.Self)
	if err != nil {
		return nil, fmt.Errorf("read the controller's own namespaces: %w", err)
	}
	return &Judge{self: ns}, nil
}

// Judge classifies p now. It fails closed: a peer that exited, whose pid
// the kernel could not name, or about which anything could not be read is
// an engine peer. Every read of /proc is bracketed by two liveness checks
// through p's pidfd: a pid is not reused while its process lives, so reads
// made between two successful checks describe the connecting process and
// not a later holder of its pid.
func (j *Judge) Judge(p *Peer) Verdict {
	reason, err := j.look(p)
	if err != nil {
		return Verdict{Engine: true, Reason: "the peer cannot be vouched for: " + err.Error()}
	}
	if reason != "" {
		return Verdict{Engine: true, Reason: reason}
	}
	return Verdict{}
}

func (j *Judge) look(p *Peer) (string, error) {
	if p == nil || p.PID <= 0 {
		return "", fmt.Errorf("%w: the kernel names no pid for the peer (its pid namespace is not visible from the controller's)", ErrPeerUnreadable)
	}
	if err := p.alive(); err != nil {
		return "", err
	}
	reason, err := j.observe(p.PID)
	if err != nil {
		return "", err
	}
	if err := p.alive(); err != nil {
		return "", err
	}
	return reason, nil
}

// observe reads what makes pid an engine peer: its namespaces, its cgroup
// and its parents' cgroups. It returns the first reason found, or "".
func (j *Judge) observe(pid int) (string, error) {
	ns, err := namespacesOf(pid)
	if err != nil {
		return "", err
	}
	switch {
	case ns.user != j.self.user:
		return fmt.Sprintf("pid %d runs in another user namespace than the controller (an engine's tools run in their own)", pid), nil
	case ns.pid != j.self.pid:
		return fmt.Sprintf("pid %d runs in another pid namespace than the controller (an engine's tools run in their own)", pid), nil
	}
	cur := pid
	for depth := 0; ; depth++ {
		cg, err := cgroupOf(cur)
		if err != nil {
			return "", err
		}
		if unit := engineScope(cg); unit != "" {
			if cur == pid {
				return fmt.Sprintf("pid %d runs inside the engine scope %s (an agent's tool)", pid, unit), nil
			}
			return fmt.Sprintf("pid %d descends from pid %d, which runs inside the engine scope %s (an agent's tool)", pid, cur, unit), nil
		}
		if depth == maxAncestry {
			return "", fmt.Errorf("%w: pid %d has more than %d ancestors", ErrPeerUnreadable, pid, maxAncestry)
		}
		ppid, err := parentOf(cur)
		if err != nil {
			return "", err
		}
		if ppid <= 1 {
			return "", nil
		}
		cur = ppid
	}
}

// namespacesOf stats /proc/<pid>/ns/{pid,user}. Another process's links
// need ptrace read access: a peer that made itself non-dumpable cannot be
// read, and so is not believed.
func namespacesOf(pid int) (namespaces, error) {
	var ns namespaces
	for _, x := range []struct {
		name string
		id   *procfs.NS
	}{{"pid", &ns.pid}, {"user", &ns.user}} {
		id, err := procfs.Namespace(pid, x.name)
		if err != nil {
			return namespaces{}, fmt.Errorf("%w: %w", ErrPeerUnreadable, err)
		}
		*x.id = id
	}
	return ns, nil
}

// cgroupOf returns the cgroup paths of pid, one per hierarchy line.
func cgroupOf(pid int) ([]string, error) {
	paths, err := procfs.Cgroups(pid)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPeerUnreadable, err)
	}
	return paths, nil
}

// engineScope returns the engine scope unit any of paths lies in, or "".
func engineScope(paths []string) string {
	for _, p := range paths {
		if s := scopeOf(p); s != "" {
			return s[strings.LastIndexByte(s, '/')+1:]
		}
	}
	return ""
}

// parentOf reads the parent pid from /proc/<pid>/stat (field 4, after the
// command name, which may itself hold spaces and parentheses).
func parentOf(pid int) (int, error) {
	st, err := procfs.ReadStat(pid)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrPeerUnreadable, err)
	}
	return st.PPID, nil
}
