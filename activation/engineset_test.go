package activation

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/internal/procfs"
)

// fakeScope makes a cgroup tree under a temporary mount: each of dirs
// (relative to the scope, "" the scope itself) with a cgroup.procs of
// its pids.
func fakeScope(t *testing.T, scope string, dirs map[string][]int) *engineSet {
	t.Helper()
	mount := t.TempDir()
	for d, pids := range dirs {
		dir := filepath.Join(mount, scope, d)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, p := range pids {
			fmt.Fprintf(&b, "%d\n", p)
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return &engineSet{mount: mount, found: true, scopes: map[string]bool{}, pids: map[int]bool{}}
}

// TestEngineSetLearnScope: a scope's pids, its sub-cgroups' too, are
// taken only where the process that led to the scope is among them, and
// a scope of more than maxScopeCgroups cgroups is read no further.
func TestEngineSetLearnScope(t *testing.T) {
	scope := "/user.slice/app.slice/" + EngineScopePrefix + "x.scope"
	many := map[string][]int{"": {1}}
	for i := range maxScopeCgroups + 10 {
		many[fmt.Sprintf("d%04d", i)] = []int{100 + i}
	}
	for _, tc := range []struct {
		name    string
		dirs    map[string][]int
		teacher int
		want    []int // held afterwards; nil: none
	}{
		{"scope and sub-cgroups", map[string][]int{"": {10, 11}, "engine": {12, 13}, "engine/tool": {14}}, 12, []int{10, 11, 12, 13, 14}},
		{"teacher absent: the path led elsewhere", map[string][]int{"": {10, 11}, "engine": {12}}, 99, nil},
		{"teacher within the bound", many, 100, []int{1, 100, 100 + maxScopeCgroups - 2}},
		{"teacher past the bound", many, 100 + maxScopeCgroups + 5, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := fakeScope(t, scope, tc.dirs)
			s.learnScope(scope, tc.teacher)
			for _, p := range tc.want {
				if !s.holds(p) {
					t.Errorf("pid %d not held, want it", p)
				}
			}
			if tc.want == nil && len(s.pids) != 0 {
				t.Errorf("held %d pids, want none", len(s.pids))
			}
			if s.holds(100 + maxScopeCgroups + 5) {
				t.Errorf("a pid past the %d cgroups read is held", maxScopeCgroups)
			}
			if len(s.pids) > 0 && !s.scopes[scope] {
				t.Error("the scope is not marked read")
			}
		})
	}
}

func TestScopeOf(t *testing.T) {
	for cg, want := range map[string]string{
		"/user.slice/user-1000.slice/user@1000.service/app.slice/app-mosaic.slice/" + EngineScopePrefix + "a.scope/engine/t": "/user.slice/user-1000.slice/user@1000.service/app.slice/app-mosaic.slice/" + EngineScopePrefix + "a.scope",
		"/" + EngineScopePrefix + "a.scope": "/" + EngineScopePrefix + "a.scope",
		"/user.slice/app.slice/other.scope": "",
		"/" + EngineScopePrefix + "a.slice": "",
		"/":                                 "",
	} {
		if got := scopeOf(cg); got != want {
			t.Errorf("scopeOf(%q) = %q, want %q", cg, got, want)
		}
	}
}

func TestAppendPids(t *testing.T) {
	got := appendPids([]int{7}, []byte("1\n22\nx\n-3\n0\n333"))
	if want := []int{7, 1, 22, 333}; !slices.Equal(got, want) {
		t.Errorf("appendPids = %v, want %v", got, want)
	}
}

// toolPids starts a tool scope of n sleeping processes and returns their
// pids, each named by the file it made once in place.
func toolPids(t testing.TB, what string, n int) []int {
	t.Helper()
	ready := toolScope(t, what, n, fmt.Sprintf(`for ((i = 0; i < %d; i++)); do (touch $ready.$BASHPID; exec sleep 600) & done; wait`, n))
	m, _ := filepath.Glob(ready + ".*")
	var pids []int
	for _, f := range m {
		p, err := strconv.Atoi(strings.TrimPrefix(filepath.Ext(f), "."))
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, p)
	}
	return pids
}

// cgroup2 is pid's cgroup2 path.
func cgroup2(t testing.TB, pid int) string {
	t.Helper()
	cg, err := procfs.Cgroup2(pid)
	if err != nil {
		t.Fatal(err)
	}
	return cg
}

// TestEngineSetLearnsToolScope (sandbox): one process of a tool's scope
// teaches the set every other, and a process outside the engines teaches
// it nothing.
func TestEngineSetLearnsToolScope(t *testing.T) {
	sandboxtest.Require(t)
	pids := toolPids(t, "learn", 20)
	s := newEngineSet()
	s.learn(os.Getpid(), cgroup2(t, os.Getpid()))
	if len(s.pids) != 0 {
		t.Fatalf("learned %d pids from this process, outside every engine scope", len(s.pids))
	}
	s.learn(pids[len(pids)-1], cgroup2(t, pids[len(pids)-1]))
	for _, p := range pids {
		if !s.holds(p) {
			t.Errorf("pid %d of the tool not learned from pid %d", p, pids[len(pids)-1])
		}
	}
	if s.holds(os.Getpid()) {
		t.Error("this process is held as an engine's")
	}
}

// TestEngineSetPathElsewhere (sandbox): a scope path that leads to a
// cgroup without the process that named it (another cgroup namespace
// than the mount's) teaches nothing.
func TestEngineSetPathElsewhere(t *testing.T) {
	sandboxtest.Require(t)
	pids := toolPids(t, "elsewhere", 2)
	cg := cgroup2(t, pids[0])
	s := fakeScope(t, scopeOf(cg), map[string][]int{"": {1, 2}})
	s.learn(pids[0], cg)
	if len(s.pids) != 0 {
		t.Errorf("learned %v from a cgroup without pid %d", s.pids, pids[0])
	}
}

// TestEngineHolderInLearnedScope (sandbox): a socket this process shares
// with a tool's process that the scope's first process taught the set
// (it is judged without a read of its own cgroup) is still read and
// refused.
func TestEngineHolderInLearnedScope(t *testing.T) {
	sandboxtest.Require(t)
	j, f, server := shared(t)
	// bash, the scope's first process, closes the shared socket after its
	// first child took it: the holder is a process the set was taught.
	toolScope(t, "learned", 11, `(touch $ready.$BASHPID; exec sleep 600) & exec 3<&-; `+
		`for ((i = 0; i < 10; i++)); do (touch $ready.$BASHPID; exec sleep 600) & done; wait`, f)
	if v := j.JudgeConn(server); !v.Engine {
		t.Fatalf("a socket shared with a tool's process learned from its scope was accepted: %+v", v)
	}
}

// noEngineSet is a set that learns nothing: every process is judged by
// its own cgroup, as before the set.
func noEngineSet() *engineSet {
	return &engineSet{found: true, scopes: map[string]bool{}, pids: map[int]bool{}}
}

// BenchmarkJudgeEngineProcesses times step 3 with a tool of
// engineProcs processes, its scope learned from its first process
// against every process judged by its own cgroup, alternated in one run.
func BenchmarkJudgeEngineProcesses(b *testing.B) {
	sandboxtest.Require(b)
	const engineProcs = 2000
	toolPids(b, "many", engineProcs)
	inode := ownSocket(b)
	var learned, oneByOne time.Duration
	run := func(s *engineSet) time.Duration {
		t0 := time.Now()
		if _, err := eachHolderIn(s, inode, func(int) bool { return true }); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 {
			learned += run(newEngineSet())
			oneByOne += run(noEngineSet())
		} else {
			oneByOne += run(noEngineSet())
			learned += run(newEngineSet())
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(learned.Nanoseconds())/n, "ns/learned")
	b.ReportMetric(float64(oneByOne.Nanoseconds())/n, "ns/one-by-one")
	b.ReportMetric(float64(learned)/float64(oneByOne), "x-one-by-one")
}

// readSyscalls is this process's count of read system calls (syscr in
// /proc/self/io).
func readSyscalls(t testing.TB) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Skipf("no task I/O accounting: %v", err)
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("syscr: ")); ok {
			n, err := strconv.Atoi(string(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no syscr in /proc/self/io")
	return 0
}

// TestEngineSetUnlearnedCostsNoMore (sandbox): a tool decides which of
// its processes the set's walk does not reach: those in a sub-cgroup it
// made mode 000 (it owns the cgroups it makes: same uid), or in one past
// maxScopeCgroups empty ones. Each such process costs a judgement no more
// read calls than with no set at all (learn takes the cgroup path
// inEngine read; it once read the file again, two more reads each).
func TestEngineSetUnlearnedCostsNoMore(t *testing.T) {
	sandboxtest.Require(t)
	n := 400
	if v, err := strconv.Atoi(os.Getenv("MOSAIC_REVIEW_PROCS")); err == nil {
		n = v
	}
	for _, tc := range []struct {
		name, setup string
		hide        bool // chmod 000 the cgroup holding the processes
	}{
		{"mode 000 sub-cgroup", `mkdir "$cg/hide" || exit 1; sub="$cg/hide"`, true},
		{"past maxScopeCgroups", fmt.Sprintf(`for ((i = 0; i < %d; i++)); do mkdir "$(printf '%%s/a%%04d' "$cg" $i)" || exit 1; done; mkdir "$cg/zz" || exit 1; sub="$cg/zz"`, maxScopeCgroups+2), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The sub-cgroup's path goes to $ready-sub, before any process
			// is in place: $ready.* names only them.
			ready := delegatedToolScope(t, fmt.Sprintf("cost-%d", len(tc.name)), []string{"Delegate=yes"}, n, fmt.Sprintf(
				`cg=/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup); %s; echo "$sub" > $ready-sub; `+
					`for ((i = 0; i < %d; i++)); do (echo $BASHPID > "$sub/cgroup.procs" || exit 1; touch $ready.$BASHPID; exec sleep 600) & done; wait`,
				tc.setup, n))
			subb, err := os.ReadFile(ready + "-sub")
			if err != nil {
				t.Fatal(err)
			}
			sub := string(bytes.TrimSpace(subb))
			if tc.hide {
				// What the tool itself can do: it owns the cgroup.
				if err := os.Chmod(sub, 0); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { os.Chmod(sub, 0o755) })
			}
			inode := ownSocket(t)
			run := func(s *engineSet) (reads int, d time.Duration) {
				r0, t0 := readSyscalls(t), time.Now()
				if _, err := eachHolderIn(s, inode, func(int) bool { return true }); err != nil {
					t.Fatal(err)
				}
				return readSyscalls(t) - r0, time.Since(t0)
			}
			// Alternated, the fastest of three of each.
			var withSet, noSet int
			dSet, dNo := time.Hour, time.Hour
			for range 3 {
				r, d := run(newEngineSet())
				withSet, dSet = r, min(dSet, d)
				r, d = run(noEngineSet())
				noSet, dNo = r, min(dNo, d)
			}
			t.Logf("%d unlearned tool processes: %d reads (%v) with the set, %d (%v) with none", n, withSet, dSet, noSet, dNo)
			// The walk itself may read each cgroup.procs it opens (two
			// reads, to EOF) of at most maxScopeCgroups cgroups.
			if allowed := noSet + 2*maxScopeCgroups + 64; withSet > allowed {
				t.Errorf("with the set a judgement made %d read calls, with none %d: %d more than the walk's %d (about %.1f per unlearned process)",
					withSet, noSet, withSet-noSet-2*maxScopeCgroups, 2*maxScopeCgroups, float64(withSet-noSet)/float64(n))
			}
		})
	}
}

// TestEngineSetHoldsOnlyScopePids (sandbox): a judgement learns a tool
// scope whose processes move between the tool's sub-cgroups while the
// scope is walked, and the set holds only pids whose cgroup is inside
// the scope (none of this process, none outside).
func TestEngineSetHoldsOnlyScopePids(t *testing.T) {
	sandboxtest.Require(t)
	const n = 200
	delegatedToolScope(t, "move", []string{"Delegate=yes"}, n, fmt.Sprintf(
		`cg=/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/self/cgroup); mkdir "$cg/a" "$cg/b" || exit 1; `+
			`for ((i = 0; i < %d; i++)); do (touch $ready.$BASHPID; exec sleep 600) & done; `+
			`while :; do for p in $(cat "$cg/cgroup.procs" "$cg/a/cgroup.procs"); do [ $p = $$ ] || echo $p > "$cg/b/cgroup.procs"; done 2>/dev/null; `+
			`for p in $(cat "$cg/b/cgroup.procs"); do echo $p > "$cg/a/cgroup.procs"; done 2>/dev/null; done`,
		n))
	for range 20 {
		s := newEngineSet()
		inode := ownSocket(t)
		if _, err := eachHolderIn(s, inode, func(int) bool { return true }); err != nil {
			t.Fatal(err)
		}
		if len(s.pids) == 0 {
			t.Fatal("nothing learned")
		}
		for p := range s.pids {
			cg, err := procfs.Cgroup2(p)
			if err != nil {
				continue // gone
			}
			if scopeOf(cg) == "" {
				t.Fatalf("pid %d, in %s, is held as an engine's", p, cg)
			}
		}
	}
}
