package scopes

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fdSize is FDSize of /proc/self/status: the slots of the descriptor
// table.
func fdSize(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range bytes.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte("FDSize:")); ok {
			n, err := strconv.Atoi(string(bytes.TrimSpace(v)))
			if err != nil {
				t.Fatalf("FDSize %q: %v", v, err)
			}
			return n
		}
	}
	t.Fatal("no FDSize in /proc/self/status")
	return 0
}

// TestGrowFDTable: the table holds slots entries after growFDTable, even
// when the descriptor at slots-1 is in use (it still names its file: the
// growth never replaces one), and no descriptor is left open.
//
// slots is twice the table's size when the test begins (at most what
// RLIMIT_NOFILE lets both cases use: F_DUPFD takes slots when slots-1 is
// busy), taken once: each case doubles the table, and a size taken again
// per case, in a process that ran the test before (-count), soon named a
// descriptor past the limit, which neither dup3 nor growFDTable may use.
func TestGrowFDTable(t *testing.T) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	size := fdSize(t)
	slots := int(min(uint64(2*size), lim.Cur-1))
	if slots <= size {
		t.Skipf("the table (%d slots) cannot grow under RLIMIT_NOFILE %d: earlier runs in this process grew it", size, lim.Cur)
	}
	for _, busy := range []bool{false, true} {
		t.Run("busy="+strconv.FormatBool(busy), func(t *testing.T) {
			var want unix.Stat_t
			if busy {
				f, err := os.CreateTemp(t.TempDir(), "held")
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				if err := unix.Dup3(int(f.Fd()), slots-1, unix.O_CLOEXEC); err != nil {
					t.Fatal(err)
				}
				defer unix.Close(slots - 1)
				if err := unix.Fstat(slots-1, &want); err != nil {
					t.Fatal(err)
				}
			}
			open := openFDs(t)
			if err := growFDTable(slots); err != nil {
				t.Fatal(err)
			}
			if got := fdSize(t); got < slots {
				t.Fatalf("FDSize %d, want at least %d", got, slots)
			}
			// Only a descriptor left open counts: one an earlier test's
			// background work closed meanwhile does not.
			for fd, to := range openFDs(t) {
				if open[fd] != to {
					t.Fatalf("descriptor %s (%s) open after, not before", fd, to)
				}
			}
			if busy {
				var got unix.Stat_t
				if err := unix.Fstat(slots-1, &got); err != nil || got.Ino != want.Ino || got.Dev != want.Dev {
					t.Fatalf("descriptor %d replaced: inode %d (%v), want %d", slots-1, got.Ino, err, want.Ino)
				}
			}
		})
	}
}

// openFDs names this process's open descriptors and where each leads,
// leaving out the one that lists them.
func openFDs(t *testing.T) map[string]string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	self := fmt.Sprintf("/proc/%d/fd", os.Getpid())
	out := map[string]string{}
	for _, e := range ents {
		if to, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && to != self {
			out[e.Name()] = to
		}
	}
	return out
}

// TestLaunchReservesFDs: a launch grows the descriptor table for the
// stop to come (reserveFDs).
func TestLaunchReservesFDs(t *testing.T) {
	m := testManager(t)
	launchEngine(t, m, echoEngine)
	select {
	case <-m.fdsReserved:
	case <-time.After(10 * time.Second):
		t.Fatal("the launch did not grow the descriptor table")
	}
	if got := fdSize(t); got < fdSlots {
		t.Fatalf("FDSize %d after a launch, want at least %d", got, fdSlots)
	}
}
