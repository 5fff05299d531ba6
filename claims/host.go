package claims

import (
	"errors"
	"io/fs"
	"os"
	"time"

	"github.com/mosaic-agents/mosaic/internal/procfs"
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

func (localHost) BootID() (string, error) { return procfs.BootID() }

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

// startTime is field 22 of /proc/<pid>/stat; a process that is gone is
// fs.ErrNotExist.
func startTime(pid int) (uint64, error) {
	st, err := procfs.ReadStat(pid)
	return st.StartTime, err
}
