package activation

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
)

// toolScope starts an engine scope named for what, whose script runs
// with $ready set to a file it may create, and waits until n files
// named $ready.* exist (each of the script's processes makes one when it
// is in place).
func toolScope(t testing.TB, what string, n int, script string, extra ...*os.File) (ready string) {
	t.Helper()
	return delegatedToolScope(t, what, nil, n, script, extra...)
}

// delegatedToolScope is toolScope with the scope's unit properties
// props (Delegate=yes: the tool makes sub-cgroups of its own).
func delegatedToolScope(t testing.TB, what string, props []string, n int, script string, extra ...*os.File) (ready string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	ready = filepath.Join(dir, "ready")
	sandboxtest.Scope(t, fmt.Sprintf("%s%s-%d", EngineScopePrefix, what, os.Getpid()), props,
		fmt.Sprintf("ready=%s; cd %s || exit 1; %s", ready, dir, script), extra...)
	for deadline := time.Now().Add(120 * time.Second); ; {
		if m, _ := filepath.Glob(ready + ".*"); len(m) >= n {
			return ready
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tool %s did not get in place", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// holdFds is a shell that raises its soft descriptor limit, opens file
// n times, says so and sleeps.
func holdFds(n int, file string) string {
	return fmt.Sprintf(`ulimit -Sn $(ulimit -Hn) || exit 1; for ((i = 0; i < %d; i++)); do exec {fd}<%s || exit 1; done; touch $ready.$BASHPID; sleep 600`, n, file)
}

// ownSocket is the inode of a loopback socket this process made and
// holds, as a browser's is seen by step 3.
func ownSocket(t testing.TB) uint64 {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	c, err := net.Dial("tcp4", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	f, err := c.(*net.TCPConn).File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// shared is a judge and a loopback connection whose client socket, as a
// file to hand to a tool, this process made and holds.
func shared(t *testing.T) (*Judge, *os.File, net.Conn) {
	t.Helper()
	j, err := NewJudge()
	if err != nil {
		t.Fatal(err)
	}
	client, server := loopbackPair(t, "tcp4", "127.0.0.1:0")
	f, err := client.(*net.TCPConn).File()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return j, f, server
}

// TestEngineDescriptorsReadBounded (sandbox): a tool whose processes hold
// twice engineFds descriptors makes a judgement of a socket made outside
// the engines read no more than engineFds of them, and the socket's
// holder outside is still found.
func TestEngineDescriptorsReadBounded(t *testing.T) {
	sandboxtest.Require(t)
	const procs, each = 2, engineFds // under the sandbox's hard limit, 20000
	toolScope(t, "fds", procs, fmt.Sprintf(`for ((p = 0; p < %d; p++)); do (%s) & done; wait`, procs, holdFds(each, "/dev/null")))
	inode := ownSocket(t)
	var holders []int
	read, err := eachHolder(inode, func(pid int) bool { holders = append(holders, pid); return true })
	if err != nil {
		t.Fatal(err)
	}
	if read > engineFds || read == 0 {
		t.Errorf("read %d descriptors of the tool's %d, want some and at most %d (engineFds)", read, procs*each, engineFds)
	}
	if len(holders) != 1 || holders[0] != os.Getpid() {
		t.Errorf("holders %v, want this process (%d) alone", holders, os.Getpid())
	}
}

// TestEngineDescriptorsTimeBounded (sandbox): descriptors of a file 1,500
// directories deep cost each read of their link ten times one of
// /dev/null or more (the kernel rebuilds the path): a judgement stops
// reading them at engineTime, far short of engineFds.
func TestEngineDescriptorsTimeBounded(t *testing.T) {
	sandboxtest.Require(t)
	deep := strings.Repeat("a/", 1500) // 3000 bytes: one path, under PATH_MAX
	toolScope(t, "deep", 1, fmt.Sprintf(`mkdir -p %s && cd %s || exit 1; : > f; %s`, deep, deep, holdFds(engineFds, "f")))
	inode := ownSocket(t)
	read, err := eachHolder(inode, func(int) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	if read >= engineFds/2 {
		t.Errorf("read %d descriptors of a deep file, want the scan cut short by engineTime (%s), far below engineFds (%d)", read, engineTime, engineFds)
	}
	t.Logf("read %d of %d", read, engineFds)
}

// TestEngineHolderReadFirst (sandbox): a socket this process shares with a
// tool's process (TestJudgeTCPEngineHolder) is refused though another
// engine's process, earlier in /proc, holds engineFds descriptors: the
// smallest tables are read first, so a bound's worth elsewhere does not
// hide it.
func TestEngineHolderReadFirst(t *testing.T) {
	sandboxtest.Require(t)
	toolScope(t, "filler", 1, holdFds(engineFds, "/dev/null"))
	j, f, server := shared(t)
	toolScope(t, "holder", 1, `touch $ready.$BASHPID; exec sleep 600`, f)
	if v := j.JudgeConn(server); !v.Engine {
		t.Fatalf("a socket shared with a tool was accepted behind another engine's %d descriptors: %+v", engineFds, v)
	}
}

// threadTableEnv makes the test binary, from init, the tool of
// TestEngineHolderInThreadTable, and names the file it makes once in
// place.
const threadTableEnv = "MOSAIC_TEST_THREAD_TABLE"

// threadFillerEnv makes it the filler of TestEngineHolderBehindThreadTable.
const threadFillerEnv = "MOSAIC_TEST_THREAD_FILLER"

func init() {
	if ready := os.Getenv(threadTableEnv); ready != "" {
		threadTableTool(ready)
	}
	if ready := os.Getenv(threadFillerEnv); ready != "" {
		threadFiller(ready)
	}
}

// threadFiller holds engineFds descriptors of /dev/null in the table of
// one of its threads, which unshared it, and few in its leader's.
func threadFiller(ready string) {
	var lim unix.Rlimit
	unix.Getrlimit(unix.RLIMIT_NOFILE, &lim)
	lim.Cur = lim.Max
	unix.Setrlimit(unix.RLIMIT_NOFILE, &lim)
	done := make(chan error)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread keeps its table
		if unix.Gettid() == unix.Getpid() {
			done <- fmt.Errorf("on the leader thread")
			return
		}
		if err := unix.Unshare(unix.CLONE_FILES); err != nil {
			done <- err
			return
		}
		for range engineFds {
			if _, err := unix.Open("/dev/null", unix.O_RDONLY, 0); err != nil {
				done <- err
				return
			}
		}
		done <- nil
		select {}
	}()
	if err := <-done; err != nil {
		os.Exit(2) // the test then finds no tool in place
	}
	os.WriteFile(ready+".in", nil, 0o644)
	time.Sleep(10 * time.Minute)
	os.Exit(0)
}

// threadTableTool keeps fd 3 (a socket handed to it) only in the table of
// one of its threads: the thread unshares its table, and the leader's
// table, the one /proc/<pid>/fd lists, closes fd 3.
func threadTableTool(ready string) {
	done := make(chan error)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread keeps its table
		if unix.Gettid() == unix.Getpid() {
			done <- fmt.Errorf("on the leader thread")
			select {}
		}
		done <- unix.Unshare(unix.CLONE_FILES)
		select {}
	}()
	if err := <-done; err != nil {
		os.Exit(2) // the test then finds no tool in place
	}
	unix.Close(3)
	os.WriteFile(ready+".in", nil, 0o644)
	time.Sleep(10 * time.Minute)
	os.Exit(0)
}

// TestEngineHolderInThreadTable (sandbox): a socket this process shares
// with a tool that keeps it only in one thread's own descriptor table is
// refused: the thread's table is read too.
func TestEngineHolderInThreadTable(t *testing.T) {
	sandboxtest.Require(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	j, f, server := shared(t)
	toolScope(t, "thread", 1, fmt.Sprintf(`exec env %s=$ready %q -test.run=^$`, threadTableEnv, self), f)
	if v := j.JudgeConn(server); !v.Engine {
		t.Fatalf("a socket a tool's thread keeps in its own table was accepted: %+v", v)
	}
}

// TestEngineHolderBehindThreadTable (sandbox): as TestEngineHolderReadFirst,
// with the other engine's descriptors in a table one of its threads keeps
// (its leader's holds a few): a process is sorted by all its tables, so
// the tool holding the shared socket is still read first and refused.
func TestEngineHolderBehindThreadTable(t *testing.T) {
	sandboxtest.Require(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	toolScope(t, "threadfiller", 1, fmt.Sprintf(`exec env %s=$ready %q -test.run=^$`, threadFillerEnv, self))
	j, f, server := shared(t)
	toolScope(t, "holder", 1, `for i in 4 5 6 7 8 9; do eval "exec $i</dev/null"; done; touch $ready.$BASHPID; exec sleep 600`, f)
	if v := j.JudgeConn(server); !v.Engine {
		t.Fatalf("a socket shared with a tool was accepted behind another engine's %d descriptors in a thread's own table: %+v", engineFds, v)
	}
}
