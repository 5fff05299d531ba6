package activation

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/mosaic-agents/mosaic/scopes"
)

// engineSet holds the pids of the engine scopes step 3 has met. Telling a
// process of an engine from another costs an open of its descriptor
// directory and a read of its cgroup, about 24 µs, and a tool can have
// processes by the tens of thousands (up to its TasksMax): 28,000 made a
// judgement take 0.67 s before the bound on the engines' own reads could
// apply. So the first process found in a scope has the scope's pids
// read, every sub-cgroup's cgroup.procs, about 2 µs a pid, and the
// scope's other processes go to the bounded pass without a system call
// of their own.
//
// The set only spares work: a pid it does not hold is judged as before,
// and a pid it holds was inside an engine scope when the scope was read,
// after /proc was listed, so the process listed under it was that one (or
// one gone since, with nothing left to read). A process of another scope,
// or born after the scope was read, is learned its own way.
type engineSet struct {
	mount  string          // the cgroup2 mount; "" learns nothing
	found  bool            // mount was looked for (learn)
	scopes map[string]bool // the scopes read, or given up on
	pids   map[int]bool
}

// maxScopeCgroups is the most cgroups of one scope a judgement reads for
// its pids. A tool may make many more (scopes.MaxToolCgroups), empty, to
// make each judgement walk them; past this, its processes are judged one
// by one, as with no set.
const maxScopeCgroups = 128

// newEngineSet is an empty set that learns from the cgroup2 hierarchy
// (scopes.Cgroup2Mount), looked for when the first scope is met: a
// judgement with no engine process reads no mountinfo.
func newEngineSet() *engineSet {
	return &engineSet{scopes: map[string]bool{}, pids: map[int]bool{}}
}

// holds reports whether pid was in an engine scope the set has read.
func (s *engineSet) holds(pid int) bool { return s.pids[pid] }

// learn reads the pids of the engine scope of cg, pid's cgroup2 path as
// inEngine read it, once per scope: a process of a scope read already,
// or one the set cannot learn, costs nothing more than with no set.
// Where pid is not among them, the scope's path did not lead to its
// cgroup (this process in another cgroup namespace than the mount's, or
// pid gone): the scope's pids are not taken.
func (s *engineSet) learn(pid int, cg string) {
	scope := scopeOf(cg)
	if scope == "" || s.scopes[scope] {
		return
	}
	if !s.found {
		s.found = true
		s.mount, _ = scopes.Cgroup2Mount()
	}
	s.learnScope(scope, pid)
}

// learnScope reads the pids of scope, a cgroup2 path, taking them where
// pid, known to be in it, is among them.
func (s *engineSet) learnScope(scope string, pid int) {
	if s.mount == "" || scope == "" || s.scopes[scope] {
		return
	}
	s.scopes[scope] = true
	var pids []int
	walked := 0
	var walk func(dir string) bool
	walk = func(dir string) bool {
		if walked++; walked > maxScopeCgroups {
			return false
		}
		if b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs")); err == nil {
			pids = appendPids(pids, b)
		}
		ents, err := os.ReadDir(dir)
		if err != nil {
			return true
		}
		for _, e := range ents {
			if e.IsDir() && !walk(filepath.Join(dir, e.Name())) {
				return false
			}
		}
		return true
	}
	walk(filepath.Join(s.mount, scope))
	found := false
	for _, p := range pids {
		found = found || p == pid
	}
	if !found {
		return
	}
	for _, p := range pids {
		s.pids[p] = true
	}
}

// scopeOf is the path of the engine scope in the cgroup path cg, up to
// and including the scope's own directory (a component named
// EngineScopePrefix*.scope); "" when cg is in none.
func scopeOf(cg string) string {
	comps := strings.Split(cg, "/")
	for i, c := range comps {
		if strings.HasPrefix(c, EngineScopePrefix) && strings.HasSuffix(c, ".scope") {
			return strings.Join(comps[:i+1], "/")
		}
	}
	return ""
}

// appendPids appends the pids of a cgroup.procs file.
func appendPids(pids []int, b []byte) []int {
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if p, err := strconv.Atoi(string(line)); err == nil && p > 0 {
			pids = append(pids, p)
		}
	}
	return pids
}
