package procfs

import (
	"encoding/binary"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

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
