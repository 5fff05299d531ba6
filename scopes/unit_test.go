package scopes

import (
	"errors"
	"os"
	"os/exec"
	"path"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/internal/procfs"
	"github.com/mosaic-agents/mosaic/proofs"
	"golang.org/x/sys/unix"
)

func TestParseEvents(t *testing.T) {
	ev, err := parseEvents([]byte("populated 0\nfrozen 1\n"))
	if err != nil || ev.Populated != 0 || ev.Frozen != 1 {
		t.Fatalf("%+v %v", ev, err)
	}
	if _, err := parseEvents([]byte("frozen 1\n")); err == nil {
		t.Fatal("events without populated accepted")
	}
}

func TestUnitName(t *testing.T) {
	n, err := UnitName("conv-1", "exec/2")
	if err != nil || n != `mosaic-engine-conv\x2d1-exec-2.scope` {
		t.Fatalf("%q %v", n, err)
	}
	if _, err := UnitName("", "e"); err == nil {
		t.Fatal("empty conversation accepted")
	}
	if _, err := UnitName(strings.Repeat("x", 300), "e"); err == nil {
		t.Fatal("overlong name accepted")
	}
	c, err := CohortOf("c", "e", "b", 1, 2, "/app.slice/mosaic-engine-c-e.scope/engine")
	if err != nil || c.Unit != "mosaic-engine-c-e.scope" || c.ScopeCgroup != "/app.slice/mosaic-engine-c-e.scope" {
		t.Fatalf("%+v %v", c, err)
	}
	if _, err := CohortOf("c", "e", "b", 1, 2, "/app.slice/other.scope/engine"); err == nil {
		t.Fatal("foreign cgroup accepted")
	}
	if c, _ := CohortOf("c", "e", "b", 1, 2, ""); c.Kind != proofs.KindProcessGroup {
		t.Fatalf("no cgroup gave %+v", c)
	}
}

// TestParseEngineScope reads back what UnitName writes, and refuses
// names it cannot have written.
func TestParseEngineScope(t *testing.T) {
	for _, tc := range [][2]string{{"pi-0123456789abcdef0123", "x-1"}, {"pi-00000000000000000000", "e7"}, {"a.b", "c\\d"}} {
		name, err := UnitName(tc[0], tc[1])
		if err != nil {
			t.Fatal(err)
		}
		c, x, ok := ParseEngineScope(name)
		if !ok || c != tc[0] || x != tc[1] {
			t.Errorf("ParseEngineScope(%q) = %q, %q, %v; want %q, %q", name, c, x, ok, tc[0], tc[1])
		}
	}
	for _, name := range []string{"mosaic-engine-a.scope", "mosaic-engine-a-b-c.scope", "mosaic-conv@a.socket", "mosaic-engine--x.scope", "mosaic-engine-a-b.service"} {
		if c, x, ok := ParseEngineScope(name); ok {
			t.Errorf("ParseEngineScope(%q) = %q, %q, true; want a refusal", name, c, x)
		}
	}
}

// TestOpenMemberIdentity: pid reuse (a start time that does not match) and
// a vanished process are refused and never signalled; a process outside
// the cohort's cgroup is not a member, whether the cgroup's id is known
// (decided through the pidfd where the kernel can) or only its path; a
// process whose cgroup id is not the recorded one is still a member when
// it is below the path (a sub-cgroup).
func TestOpenMemberIdentity(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := cmd.Process.Pid
	st, err := procfs.ReadStat(pid)
	if err != nil {
		t.Fatal(err)
	}
	cg := cgroupOf(t, pid)
	own, id := cg.Path, cg.ID
	for _, tc := range []struct {
		name   string
		start  uint64
		within cgroupRef
		want   error
	}{
		{"recorded start matches", st.StartTime, cgroupRef{Path: own}, nil},
		{"pid reused", st.StartTime + 1, cgroupRef{}, ErrPIDReused},
		{"pid reused, in the cgroup by id", st.StartTime + 1, cgroupRef{Path: own, ID: id}, ErrPIDReused},
		{"outside the cgroup", 0, cgroupRef{Path: own + "-other"}, ErrNotMember},
		{"in the cgroup by id", 0, cgroupRef{Path: own, ID: id}, nil},
		{"another id, below the path", 0, cgroupRef{Path: path.Dir(own), ID: id + 1}, nil},
		{"another id, outside the path", 0, cgroupRef{Path: own + "-other", ID: id + 1}, ErrNotMember},
		// A cgroup at our path with another id replaced ours there.
		{"another id, at the path itself", 0, cgroupRef{Path: own, ID: id + 1}, ErrNotMember},
		// The pidfd's own answer decides when the kernel gives it: the
		// path is then not read at all.
		{"the id decides", 0, cgroupRef{Path: own + "-other", ID: id}, nil},
	} {
		if (tc.name == "the id decides" || tc.name == "another id, at the path itself") && !pidfdInfoCgroup(t, pid) {
			t.Logf("skipping %q: this kernel has no PIDFD_GET_INFO (Linux 6.13)", tc.name)
			continue
		}
		if tc.name == "another id, below the path" && own == "/" {
			t.Logf("skipping %q: the test runs in the root cgroup, which has no parent", tc.name)
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			m, err := openMember(pid, tc.start, tc.within)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if m != nil {
				if m.Comm != "sleep" || m.StartTime != st.StartTime {
					t.Fatalf("member %+v", m.Member)
				}
				m.close()
			}
		})
	}
	// A pgroup handle whose recorded start time is wrong never signals.
	h := NewManager(Config{}).Reattach(Cohort{Kind: proofs.KindProcessGroup, PID: pid, StartTime: st.StartTime + 1})
	term := h.Term(t.Context(), 50*time.Millisecond)
	if len(term.Signalled) != 0 || !strings.Contains(strings.Join(term.Notes, " "), "pid reused") {
		t.Fatalf("TERM with a reused pid: %+v", term)
	}
	if res := h.Kill(t.Context(), StopOptions{KillTimeout: 50 * time.Millisecond}); res.Outcome != Uncertain {
		t.Fatalf("kill with a reused pid: %+v", res)
	}
	if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("a process with another start time was signalled: %v", err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if _, err := openMember(pid, 0, cgroupRef{}); !errors.Is(err, ErrVanished) {
		t.Fatalf("reaped pid: %v, want ErrVanished", err)
	}
}

// TestPlacedRefusesAReapedProcess: a pidfd kept across its process's
// reaping names no member, even by the cohort's cgroup id. From Linux
// 6.15 the kernel keeps a reaped process's cgroup id for PIDFD_INFO_EXIT:
// asked for, it would let the id path accept a process whose pid (and so
// the /proc/<pid>/stat read by it) may already be another's.
func TestPlacedRefusesAReapedProcess(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	cg := cgroupOf(t, pid)
	m, err := openMember(pid, 0, cg)
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("live child: %v", err)
	}
	defer m.close()
	cmd.Process.Kill()
	cmd.Wait()
	if err := m.placed(cg); !errors.Is(err, ErrVanished) {
		t.Fatalf("reaped process placed: %v, want ErrVanished", err)
	}
}

func TestWaitDeathsObservesEachDeath(t *testing.T) {
	var ms []*member
	for range 3 {
		cmd := exec.Command("sleep", "30")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		m, err := openMember(cmd.Process.Pid, 0, cgroupRef{})
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
		t.Cleanup(func() { m.close(); cmd.Process.Kill(); cmd.Wait() })
	}
	if alive := waitDeaths(ms, time.Time{}); len(alive) != 3 {
		t.Fatalf("%d alive, want 3", len(alive))
	}
	before := procfs.BoottimeNanos()
	for _, m := range ms[:2] {
		if err := m.signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	alive := waitDeaths(ms, time.Now().Add(200*time.Millisecond))
	if len(alive) != 1 || alive[0] != ms[2] {
		t.Fatalf("alive %v", alive)
	}
	for _, m := range ms[:2] {
		if !m.Died || m.DiedAt < before || m.DiedAt < ticksToNanos(m.StartTime) {
			t.Fatalf("death of %+v not recorded after %d", m.Member, before)
		}
	}
}

// TestVerdict: stopped needs every part of the observation.
func TestVerdict(t *testing.T) {
	good := func() proofs.Observation {
		return proofs.Observation{
			Kind: proofs.KindScope, Unit: "u.scope", MembershipComplete: true, CgroupPresent: true,
			Members:    []proofs.MemberObservation{{PID: 10, StartTime: 1, Comm: "sh", Died: true, DiedAt: 50}},
			ObservedAt: 60, ActiveState: "inactive", Cgroup: "/a/u.scope/engine",
			Confinement: proofs.Confinement{Confined: true, CgroupRoot: "/a/u.scope/engine", Masked: []string{"/run/user/1/bus"},
				Namespaces: []proofs.Namespace{{Type: "user", Engine: 2, Controller: 1}, {Type: "mnt", Engine: 2, Controller: 1},
					{Type: "pid", Engine: 2, Controller: 1}, {Type: "cgroup", Engine: 2, Controller: 1}}},
		}
	}
	if o := good(); func() Outcome { out, _ := verdict(&o); return out }() != Stopped {
		t.Fatal("complete observation not stopped")
	}
	for _, tc := range []struct {
		name string
		mut  func(*proofs.Observation)
	}{
		{"process group", func(o *proofs.Observation) { o.Kind = proofs.KindProcessGroup }},
		{"incomplete membership", func(o *proofs.Observation) { o.MembershipComplete = false }},
		{"absent cgroup", func(o *proofs.Observation) { o.CgroupPresent = false }},
		{"populated", func(o *proofs.Observation) { o.Populated = 1 }},
		{"death unobserved", func(o *proofs.Observation) { o.Members[0].Died = false }},
		{"observed before death", func(o *proofs.Observation) { o.ObservedAt = 40 }},
		{"unit active", func(o *proofs.Observation) { o.ActiveState = "active" }},
		{"engine unconfined", func(o *proofs.Observation) { o.Confinement = proofs.Confinement{Reason: "turned off"} }},
		{"confinement not recorded", func(o *proofs.Observation) { o.Confinement = proofs.Confinement{} }},
		{"cgroup namespace elsewhere", func(o *proofs.Observation) { o.Confinement.CgroupRoot = "/a" }},
	} {
		o := good()
		tc.mut(&o)
		if out, why := verdict(&o); out != Uncertain || why == "" {
			t.Errorf("%s: %s %q", tc.name, out, why)
		}
	}
}

// TestAwaitReady: a re-executed program that never entered its role (main
// without MaybeRunHeld) is refused before anything is released; an anchor
// that never said it was ready is refused naming the shell it runs in.
func TestAwaitReady(t *testing.T) {
	for _, tc := range []struct {
		name, role, write string
		want              error // nil: ready
	}{
		{"held", roleHeld, roleHeld, nil},
		{"silent", roleHeld, "", errNotWired},
		{"other role", roleHeld, roleAnchor, errNotWired},
		{"anchor", roleAnchor, roleAnchor, nil},
		{"silent anchor", roleAnchor, "", errAnchorSilent},
	} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		w.WriteString(tc.write)
		w.Close()
		err = awaitReady(r, tc.role, time.Now().Add(time.Second))
		r.Close()
		if (tc.want == nil) != (err == nil) || !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

// TestUnreadReleaseNamesRole: a release larger than a pipe holds, written
// before the child reads, fails at its deadline when nothing reads it; a
// child that never said its role (main without MaybeRunHeld) is then
// named as such, one that did keeps the write's own error.
func TestUnreadReleaseNamesRole(t *testing.T) {
	big := release{Path: "/bin/true", Argv: []string{"true"}, Env: []string{"A=" + strings.Repeat("x", 200<<10)}}
	for _, tc := range []struct {
		name, role string
		notWired   bool
	}{
		{"silent", "", true},
		{"held", roleHeld, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rr, rw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { rr.Close(); rw.Close() })
			yr, yw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { yr.Close() })
			yw.WriteString(tc.role)
			yw.Close()
			h := &heldChild{release: rw, ready: yr}
			err = h.sendRelease(big, time.Now().Add(200*time.Millisecond))
			if err == nil || errors.Is(err, errNotWired) != tc.notWired {
				t.Fatalf("%v, want errNotWired %v", err, tc.notWired)
			}
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("%v: the write's own error is lost", err)
			}
		})
	}
}

// pidfdInfoCgroup says whether this kernel names a process's cgroup
// through its pidfd (PIDFD_GET_INFO).
func pidfdInfoCgroup(t *testing.T, pid int) bool {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	info := unix.PidfdInfo{Mask: unix.PIDFD_INFO_CGROUPID}
	return unix.IoctlPidfdInfo(fd, &info) == nil && info.Mask&unix.PIDFD_INFO_CGROUPID != 0
}

// cgroupOf names pid's cgroup as a launch records the engine's: its path
// and its directory's inode number.
func cgroupOf(tb testing.TB, pid int) cgroupRef {
	tb.Helper()
	path, err := procfs.Cgroup2(pid)
	if err != nil {
		tb.Fatal(err)
	}
	mount, err := Cgroup2Mount()
	if err != nil {
		tb.Fatal(err)
	}
	var fi unix.Stat_t
	if err := unix.Stat(mount+path, &fi); err != nil {
		tb.Fatal(err)
	}
	return cgroupRef{Path: path, ID: fi.Ino}
}
