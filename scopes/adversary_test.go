package scopes

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/internal/procfs"
)

// cgroupAttacks are what a tool (same uid, owner of the delegated engine
// cgroup it sees at /sys/fs/cgroup inside its cgroup namespace) can do to
// the cgroup files a stop reads and writes. Each prints "attack 0" once
// the attack is in place (anything else when the kernel refused it), and
// leaves a setsid child behind that the stop must kill and name.
var cgroupAttacks = []struct {
	name, script string
	note         string // in the stop's notes, when the stop had to undo the attack
	tool         bool   // the script prints "tool PID" of a process the attack hides
	unbounded    bool   // the scope's depth bound lifted first, as a scope launched before it had none
}{
	// Thaw the engine cgroup again and again, from its own cgroup: a
	// freeze of that cgroup alone never reports frozen 1 and the stop
	// ends uncertain at its deadline. "attack 0" waits until each thawer
	// holds the file open, so ignores SIGTERM already: a stop begun
	// before would kill them with the TERM phase, and the kill phase
	// would never meet the attack.
	{"thaw loop", `cg=/sys/fs/cgroup a=0 p=
echo 0 > $cg/cgroup.freeze || a=1
for i in 1 2 3; do perl -e '$SIG{TERM}="IGNORE"; open(F, ">", $ARGV[0]) or die; syswrite(F, "0") while 1' $cg/cgroup.freeze </dev/null >/dev/null 2>&1 & p="$p $!"; done
for i in $p; do n=0; until ls -l /proc/$i/fd 2>/dev/null | grep -q cgroup.freeze; do n=$((n+1)); [ $n -lt 1000 ] || { a=1; break; }; sleep 0.01; done; done
echo "attack $a"`, "", false, false},
	// A threaded sub-cgroup holding a process: cgroup.procs of a
	// threaded cgroup cannot be read (EOPNOTSUPP), its processes are
	// listed by its threaded domain.
	{"threaded sub-cgroup", `cg=/sys/fs/cgroup
mkdir $cg/t && echo threaded > $cg/t/cgroup.type
sh -c 'echo $$ > /sys/fs/cgroup/t/cgroup.threads; exec sleep 301' </dev/null >/dev/null 2>&1 &
echo "tool $!"; sleep 0.2
grep -q threaded $cg/t/cgroup.type && grep -q . $cg/t/cgroup.threads && echo "attack 0" || echo "attack 1"`, "", true, false},
	// Every file and directory of the engine cgroup made mode 000 by
	// its owner, deepest first: the controller (same uid) reads none of
	// them until it gives itself access again.
	{"chmod 000", `cg=/sys/fs/cgroup
mkdir $cg/c
sh -c 'echo $$ > /sys/fs/cgroup/c/cgroup.procs; exec sleep 302' </dev/null >/dev/null 2>&1 &
sleep 0.2
find $cg -depth -exec chmod 000 {} + 2>/dev/null
if cat $cg/cgroup.procs >/dev/null 2>&1; then echo "attack 1"; else echo "attack 0"; fi`, "owner access restored", false, false},
	// Sub-cgroups nested as deep as the scope lets (MaxToolDepth), each
	// with the longest name, a process in the deepest. The bound keeps the
	// path under PATH_MAX (past it, no open by name could reach the
	// cgroup), and the walk opens each cgroup from its parent anyway.
	{"nested to the depth bound", `perl -e 'chdir "/sys/fs/cgroup" or die; my $n = "0" x 250;
for (1..64) { mkdir $n or last; chdir $n or die }
open(F, ">", "cgroup.procs") or die; print F "$$\n"; close F or die; exec "sleep", "303"' </dev/null >/dev/null 2>&1 &
echo "tool $!"; sleep 0.2
[ $(grep -o "/0\{250\}" /proc/$!/cgroup | wc -l) -eq ` + strconv.Itoa(MaxToolDepth) + ` ] && echo "attack 0" || echo "attack 1"`, "", true, false},
	// In a scope launched before that bound (an engine an older mosaic
	// launched, adopted after an upgrade), sub-cgroups nested until the
	// path of the deepest, from the mount, is longer than PATH_MAX, a
	// process in it: no open of that path by name can succeed
	// (ENAMETOOLONG), so a walk that names each cgroup by its whole path
	// can never list it.
	{"path past PATH_MAX", `perl -e 'chdir "/sys/fs/cgroup" or die; my $n = "0" x 250;
for (1..20) { mkdir $n or die; chdir $n or die }
open(F, ">", "cgroup.procs") or die; print F "$$\n"; close F or die; exec "sleep", "303"' </dev/null >/dev/null 2>&1 &
echo "tool $!"; sleep 0.2
[ $(wc -c < /proc/$!/cgroup) -gt 4096 ] && echo "attack 0" || echo "attack 1"`, "", true, true},
}

// TestToolCgroupAttacksStillProven: whatever a tool does to the cgroup
// files it owns (thaw its cgroup during the freeze, make a sub-cgroup
// threaded, take every permission away, nest cgroups as deep as it may), the
// force stop still kills every process of the cohort and proves it.
func TestToolCgroupAttacksStillProven(t *testing.T) {
	m := testManager(t)
	for _, tc := range cgroupAttacks {
		t.Run(tc.name, func(t *testing.T) {
			e := launchEngine(t, m, `echo "engine $$"
setsid sh -c 'echo "setsid $$"; exec sleep 300' </dev/null &
echo "ready 1"; read go
`+tc.script+`
exec cat`)
			got := e.expect(t, "engine", "setsid", "ready")
			// Pinned before the attack, which may hide them.
			eng, child := e.pin(t, got["engine"]), e.pin(t, got["setsid"])
			if tc.unbounded {
				fs, err := m.cgroupFS()
				if err != nil {
					t.Fatal(err)
				}
				if err := fs.write(e.Cohort.ScopeCgroup, "cgroup.max.depth", "max"); err != nil {
					t.Fatal(err)
				}
			}
			e.Stdin.WriteString("go\n")
			want := []string{"attack"}
			if tc.tool {
				want = append(want, "tool")
			}
			a := e.expect(t, want...)
			if a["attack"] != "0" {
				t.Fatalf("the attack did not take (%q): nothing shown", a["attack"])
			}
			pins := []pinned{eng, child}
			if tc.tool {
				pins = append(pins, pinDescendant(t, e, a["tool"]))
			}
			res := e.Stop(ctxT(t), StopOptions{Stop: "stop-attack", Grace: 200 * time.Millisecond, KillTimeout: 5 * time.Second})
			assertProvenStop(t, res, pins...)
			requireProof(t, res)
			if tc.note != "" && !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.Contains(n, tc.note) }) {
				t.Fatalf("notes %q: none says %q", res.Notes, tc.note)
			}
		})
	}
}

// pinDescendant pins the engine's descendant whose pid inside the engine's
// pid namespace is nsText, found in the whole process list rather than in
// the cgroup an attack may hide it from.
func pinDescendant(t *testing.T, e *engine, nsText string) pinned {
	t.Helper()
	ns, err := strconv.Atoi(nsText)
	if err != nil {
		t.Fatalf("pid %q: %v", nsText, err)
	}
	for _, pid := range descendants(t, e.Cohort.PID) {
		if l, err := procfs.NSpid(pid); err == nil && len(l) > 1 && l[len(l)-1] == ns {
			return pin(t, strconv.Itoa(pid))
		}
	}
	t.Fatalf("no descendant of the engine is pid %d inside", ns)
	return pinned{}
}

// TestToolCgroupTreeBounded: a tool that makes sub-cgroups without end
// (it owns the engine cgroup) is refused past MaxToolCgroups by the
// scope's bound, which it cannot name or raise, so the walk every stop
// makes of the tree stays short; the stop still proves the cohort.
func TestToolCgroupTreeBounded(t *testing.T) {
	m := testManager(t)
	const tries = 4 * MaxToolCgroups
	e := launchEngine(t, m, `echo "engine $$"
perl -e 'chdir "/sys/fs/cgroup" or die; my $d = 0;
for (1..64) { mkdir "n" or last; chdir "n" or last; $d++ } print "deep $d\n";
for (1..$d) { chdir ".." or die; rmdir "n" or die }'
perl -e 'chdir "/sys/fs/cgroup" or die; mkdir "w" or die; chdir "w" or die; my $n = 1;
for (1..`+strconv.Itoa(tries)+`) { mkdir "d$_" or last; $n++ } print "made $n\n"'
echo "ready 1"
exec cat`)
	got := e.expect(t, "engine", "deep", "made", "ready")
	if deep, err := strconv.Atoi(got["deep"]); err != nil || deep < 1 || deep > MaxToolDepth {
		t.Fatalf("a tool nested %q sub-cgroups deep, want 1 to %d", got["deep"], MaxToolDepth)
	}
	made, err := strconv.Atoi(got["made"])
	if err != nil {
		t.Fatalf("made %q: %v", got["made"], err)
	}
	if made > MaxToolCgroups {
		t.Fatalf("a tool made %d sub-cgroups of %d tried, want at most %d", made, tries+1, MaxToolCgroups)
	}
	eng := e.pin(t, got["engine"])
	res := e.Stop(ctxT(t), StopOptions{Stop: "stop-tree", Grace: 200 * time.Millisecond, KillTimeout: 5 * time.Second})
	assertProvenStop(t, res, eng)
	requireProof(t, res)
}
