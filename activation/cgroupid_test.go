package activation

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
)

// TestCgroupMatchComparesTheDevice: a directory whose inode number is the
// id but which lies on another filesystem (a cgroup v1 hierarchy or the
// tmpfs of a hybrid host) is not that cgroup.
func TestCgroupMatchComparesTheDevice(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "g"), 0o755); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(dir, "g"), &st); err != nil {
		t.Fatal(err)
	}
	same := cgroupFS{mount: dir, dev: st.Dev}
	other := cgroupFS{mount: dir, dev: st.Dev + 1}
	if !same.cgroupDir(&st) {
		t.Fatal("the directory on the mount's own device was not taken for a cgroup")
	}
	if other.cgroupDir(&st) {
		t.Fatal("a directory on another device was taken for a cgroup")
	}
	of := map[uint64]string{}
	if err := other.outsideManagers(of); err != nil || of[st.Ino] != "" {
		t.Fatalf("walk on another device: %q, %v; want not found", of[st.Ino], err)
	}
	if err := same.outsideManagers(of); err != nil || of[st.Ino] != "/g" {
		t.Fatalf("walk on the mount's own device: %q, %v; want /g", of[st.Ino], err)
	}
}

// delegatedScope starts a scope with Delegate=yes whose script runs with
// $cg set to the scope's cgroup directory, and stops it at cleanup.
func delegatedScope(tb testing.TB, name, script string) {
	tb.Helper()
	sandboxtest.Scope(tb, name, []string{"Delegate=yes"}, `cg=/sys/fs/cgroup$(sed -n "s/^0:://p" /proc/self/cgroup); `+script)
}

// engineSubcgroupConn has a Delegate=yes engine scope make n empty
// sub-cgroups and connect from one more sub-cgroup; it returns the
// server's end.
func engineSubcgroupConn(tb testing.TB, name string, n int) net.Conn {
	tb.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	port := l.Addr().(*net.TCPAddr).Port
	delegatedScope(tb, name, fmt.Sprintf(`mkdir $cg/a && echo $$ > $cg/a/cgroup.procs; for i in $(seq 1 %d); do mkdir $cg/x$i; done; mkdir $cg/zz; (echo $BASHPID > $cg/zz/cgroup.procs; exec 3<>/dev/tcp/127.0.0.1/%d; printf x >&3; sleep 600) & wait`, n, port))
	l.(*net.TCPListener).SetDeadline(time.Now().Add(120 * time.Second))
	c, err := l.Accept()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	c.Read(make([]byte, 1))
	return c
}

// TestJudgeTCPEngineSubcgroup (sandbox): a socket made in a sub-cgroup an
// engine made in its delegated scope is found (through the process in it)
// and refused naming the scope; once no process is left in that cgroup the
// socket is still refused, since nothing outside the user managers'
// subtrees has its id.
func TestJudgeTCPEngineSubcgroup(t *testing.T) {
	sandboxtest.Require(t)
	j, err := NewJudge()
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("mosaic-engine-subcg-%d", os.Getpid())
	c := engineSubcgroupConn(t, name, 50)
	if v := j.JudgeConn(c); !v.Engine || !strings.Contains(v.Reason, name) {
		t.Fatalf("a socket made in a sub-cgroup of %s: %+v, want refused naming the scope", name, v)
	}
	diag, err := diagTCP(addrPort(c.RemoteAddr().(*net.TCPAddr)), addrPort(c.LocalAddr().(*net.TCPAddr)))
	if err != nil {
		t.Fatal(err)
	}
	p, err := j.place(diag.cgroup)
	if err != nil || !strings.HasSuffix(p.path, "/"+name+".scope/zz") || p.unit != name+".scope" {
		t.Fatalf("place = %+v, %v; want the scope's zz, in the scope", p, err)
	}
	// An id that names no cgroup, inside a manager's subtree or anywhere,
	// waits for the next look (at most lookEvery), which does not place
	// it either.
	t0 := time.Now()
	if p, err := j.place(1 << 62); err == nil || !errors.Is(err, errNotPlaced) {
		t.Fatalf("an id no cgroup has: %+v, %v; want not placed", p, err)
	}
	if d := time.Since(t0); d > lookEvery+time.Second {
		t.Fatalf("placing an unknown id took %s, more than the next look", d)
	}
}

// BenchmarkJudgeTCPEngineCgroups (sandbox) measures judgements while an
// engine scope holds 3000 empty sub-cgroups: the engine's own connection
// (refused) and a legitimate one (this process's).
func BenchmarkJudgeTCPEngineCgroups(b *testing.B) {
	sandboxtest.Require(b)
	j, err := NewJudge()
	if err != nil {
		b.Fatal(err)
	}
	engine := engineSubcgroupConn(b, fmt.Sprintf("mosaic-engine-benchcg-%d", os.Getpid()), 3000)
	_, legit := loopbackPair(b, "tcp4", "127.0.0.1:0")
	b.Run("engine", func(b *testing.B) {
		for b.Loop() {
			if v := j.JudgeConn(engine); !v.Engine {
				b.Fatal("the engine's connection was not refused")
			}
		}
	})
	b.Run("legit", func(b *testing.B) {
		for b.Loop() {
			if v := j.JudgeConn(legit); v.Engine {
				b.Fatal(v.Reason)
			}
		}
	})
}

// TestLooksAtMostOnceASecond: ids that no look places, however many and
// however fast they come (a tool making a sub-cgroup, a socket in it, and
// removing it, again and again), cost at most one look every lookEvery.
func TestLooksAtMostOnceASecond(t *testing.T) {
	if _, err := openCgroup2(); err != nil {
		sandboxtest.Unavailable(t, "no cgroup2 mount: %v", err)
	}
	j := &Judge{}
	var looks []time.Time
	start := time.Now()
	for id := uint64(1 << 62); time.Since(start) < 2500*time.Millisecond; id++ {
		if _, err := j.place(id); !errors.Is(err, errNotPlaced) {
			t.Fatalf("id %d: %v, want not placed", id, err)
		}
		if at := j.places.at; len(looks) == 0 || !at.Equal(looks[len(looks)-1]) {
			looks = append(looks, at)
		}
	}
	for i := 1; i < len(looks); i++ {
		if d := looks[i].Sub(looks[i-1]); d < lookEvery {
			t.Fatalf("looks %d and %d came %s apart, less than %s", i-1, i, d, lookEvery)
		}
	}
	if len(looks) < 2 || len(looks) > 4 {
		t.Fatalf("%d looks in 2.5 s of unknown ids, want 2 to 4", len(looks))
	}
}

// TestPlacedNeverWaitsForALook: a look can take as long as a tool makes
// it (many processes in deep cgroups). An id the last look placed, the
// user's browser's, is answered at once while an unknown id's look runs,
// and a question asked during a look waits for the one after it.
func TestPlacedNeverWaitsForALook(t *testing.T) {
	const known, later = uint64(7), uint64(8)
	var looks atomic.Int32
	release := make(chan struct{})
	j := &Judge{}
	j.places.look = func() (map[uint64]string, error) {
		switch looks.Add(1) {
		case 1:
			return map[uint64]string{known: "/user.slice/app.slice/browser.scope"}, nil
		case 2:
			<-release // a slow look, begun before the new cgroup was made
			return map[uint64]string{known: "/user.slice/app.slice/browser.scope"}, nil
		}
		return map[uint64]string{known: "/user.slice/app.slice/browser.scope", later: "/user.slice/app.slice/new.scope"}, nil
	}
	if _, err := j.place(known); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := j.place(1 << 62); done <- err }() // starts the slow look after lookEvery
	deadline := time.Now().Add(5 * time.Second)
	for looks.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the unknown id never started a look")
		}
		time.Sleep(10 * time.Millisecond)
	}
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(free)
	answered := make(chan error, 1)
	go func() { _, err := j.place(known); answered <- err }()
	select {
	case err := <-answered:
		if err != nil {
			t.Fatalf("a placed id during a look: %v", err)
		}
	case <-time.After(time.Second):
		t.Fatal("a placed id waited for the look in flight")
	}
	placedLater := make(chan error, 1)
	go func() { _, err := j.place(later); placedLater <- err }() // asked during the look
	time.Sleep(50 * time.Millisecond)
	free()
	if err := <-done; !errors.Is(err, errNotPlaced) {
		t.Fatalf("the unknown id: %v, want not placed", err)
	}
	// Asked while the slow look ran, which began before: it waits for the
	// next look, which (here) places it.
	if err := <-placedLater; err != nil {
		t.Fatalf("an id asked for during a look: %v, want it placed by the next", err)
	}
	if n := looks.Load(); n != 3 {
		t.Fatalf("%d looks, want 3", n)
	}
}
