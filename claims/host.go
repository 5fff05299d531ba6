package claims

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"time"
)

// Host is what restart classification reads from the machine. LocalHost
// reads /proc; tests pass a fake.
type Host interface {
	// BootID is /proc/sys/kernel/random/boot_id.
	BootID() (string, error)
	// Self identifies the calling process, recorded as each revision's
	// writer.
	Self() (Process, error)
	// Alive reports whether p (same boot) still exists: a process with its
	// pid and the same start time.
	Alive(p Process) (bool, error)
	// Now is the wall clock, for people reading proofs only.
	Now() time.Time
}

// LocalHost returns the Host of this machine.
func LocalHost() Host { return localHost{} }

type localHost struct{}

func (localHost) BootID() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", fmt.Errorf("read boot id: %w", err)
	}
	return string(bytes.TrimSpace(b)), nil
}

func (h localHost) Self() (Process, error) {
	boot, err := h.BootID()
	if err != nil {
		return Process{}, err
	}
	pid := os.Getpid()
	start, err := startTime(pid)
	if err != nil {
		return Process{}, err
	}
	return Process{BootID: boot, PID: pid, StartTime: start}, nil
}

func (localHost) Alive(p Process) (bool, error) {
	start, err := startTime(p.PID)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return start == p.StartTime, nil
}

func (localHost) Now() time.Time { return time.Now() }

// startTime reads field 22 of /proc/<pid>/stat. The command name (field 2)
// may hold spaces and parentheses, so fields are counted after the last ')'.
func startTime(pid int) (uint64, error) {
	path := "/proc/" + strconv.Itoa(pid) + "/stat"
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("read %q: %w", path, err)
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("parse %q: no command name", path)
	}
	fields := bytes.Fields(b[i+1:])
	// After ')' come field 3 (state) onward; field 22 is index 19.
	if len(fields) < 20 {
		return 0, fmt.Errorf("parse %q: %d fields", path, len(fields))
	}
	v, err := strconv.ParseUint(string(fields[19]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse %q start time: %w", path, err)
	}
	return v, nil
}
