package scopes

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// procStat is what this package reads from /proc/<pid>/stat.
type procStat struct {
	Comm      string
	StartTime uint64 // field 22: clock ticks since boot
}

// parseStat parses the contents of /proc/<pid>/stat. The command name lies
// between the first '(' and the last ')': it may itself contain spaces and
// parentheses, so splitting on spaces before the last ')' would misread
// every later field.
func parseStat(b []byte) (procStat, error) {
	open := bytes.IndexByte(b, '(')
	close := bytes.LastIndexByte(b, ')')
	if open < 0 || close < open {
		return procStat{}, fmt.Errorf("stat: no (comm): %q", truncate(b))
	}
	comm := string(b[open+1 : close])
	// Fields after the comm start at field 3 (state).
	rest := strings.Fields(string(b[close+1:]))
	const startField = 22
	idx := startField - 3
	if len(rest) <= idx {
		return procStat{}, fmt.Errorf("stat: %d fields after comm, need %d", len(rest), idx+1)
	}
	st, err := strconv.ParseUint(rest[idx], 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("stat: start time %q: %w", rest[idx], err)
	}
	return procStat{Comm: comm, StartTime: st}, nil
}

func truncate(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}

// readStat reads /proc/<pid>/stat. A missing process is os.ErrNotExist.
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			err = fmt.Errorf("pid %d: %w", pid, os.ErrNotExist)
		}
		return procStat{}, err
	}
	return parseStat(b)
}

// procCgroup returns the cgroup2 path of pid from /proc/<pid>/cgroup (the
// "0::" line), as seen from this process's cgroup namespace.
func procCgroup(pid int) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return "", err
	}
	return parseProcCgroup(b)
}

func parseProcCgroup(b []byte) (string, error) {
	for line := range strings.SplitSeq(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p, nil
		}
	}
	return "", fmt.Errorf("no cgroup2 (0::) line in /proc/<pid>/cgroup")
}

// BootID reads /proc/sys/kernel/random/boot_id (a lowercase UUID).
func BootID() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", fmt.Errorf("boot id: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// BoottimeNanos is CLOCK_BOOTTIME in nanoseconds: the clock that process
// start times count on, so deaths and observations compare with starts.
func BoottimeNanos() uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		panic("clock_gettime(CLOCK_BOOTTIME): " + err.Error()) // never fails on Linux
	}
	return uint64(ts.Sec)*uint64(time.Second) + uint64(ts.Nsec)
}

// ClockTicks is USER_HZ, the unit of /proc/<pid>/stat start times, read
// from the auxiliary vector (AT_CLKTCK); 100 if the vector is unreadable,
// which is what every Linux architecture uses.
func ClockTicks() uint64 { return clockTicks() }

// clockTicks memoises a constant of the running kernel.
var clockTicks = sync.OnceValue(func() uint64 {
	b, err := os.ReadFile("/proc/self/auxv")
	if err != nil {
		return 100
	}
	const atClktck = 17
	for len(b) >= 16 {
		k, v := binary.NativeEndian.Uint64(b), binary.NativeEndian.Uint64(b[8:])
		if k == atClktck && v > 0 {
			return v
		}
		if k == 0 {
			break
		}
		b = b[16:]
	}
	return 100
})
