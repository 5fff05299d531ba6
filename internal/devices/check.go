package devices

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
)

// Dir is where devices are named.
const Dir = "/dev"

// Max bounds a conversation's devices: each is a mount in the engine's
// namespace.
const Max = 32

// The names of an engine's own /dev that are its own (scopes makes
// them): the directories that hold instances of its own, and ptmx, a
// link to its own ptys' multiplexer. No device of the host's is bound
// there.
const (
	PTS    = "/dev/pts"
	PTMX   = "/dev/ptmx"
	Shm    = "/dev/shm"
	Mqueue = "/dev/mqueue"
)

// Plain are the devices every engine's /dev holds (bound from the host's
// nodes): giving one again changes nothing.
var Plain = []string{"null", "zero", "full", "random", "urandom", "tty"}

// ErrRefused is the class of every refusal of Check.
var ErrRefused = errors.New("device refused")

// Check returns devices without the plain ones and repeats, or refuses
// the list: more than Max, or a path that is not clean, not below Dir, or
// at or below PTS, PTMX, Shm or Mqueue.
func Check(devices []string) ([]string, error) {
	if len(devices) > Max {
		return nil, fmt.Errorf("%w: %d devices, at most %d", ErrRefused, len(devices), Max)
	}
	var out []string
	for _, d := range devices {
		rel, ok := strings.CutPrefix(d, Dir+"/")
		switch {
		case !ok || rel == "" || path.Clean(d) != d:
			return nil, fmt.Errorf("%w: %q is not a clean path below %s", ErrRefused, d, Dir)
		case slices.ContainsFunc([]string{PTS, PTMX, Shm, Mqueue}, func(own string) bool { return d == own || strings.HasPrefix(d, own+"/") }):
			return nil, fmt.Errorf("%w: %q is where the engine's own ptys, shared memory or queues go", ErrRefused, d)
		case slices.Contains(Plain, rel) || slices.Contains(out, d):
			continue
		}
		out = append(out, d)
	}
	return out, nil
}
