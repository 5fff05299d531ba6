package activation

import (
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// BenchmarkHoldsInode times the search of one process's descriptors for
// a socket it does not hold, with 10,000 descriptors open: what each
// judgement of a web request pays per process, and most for an engine
// that opens many (x-readlink is against os.Readlink of every one, the
// plain way to read them).
func BenchmarkHoldsInode(b *testing.B) {
	const n = 10000
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur < n+100 {
		b.Skipf("needs %d descriptors, RLIMIT_NOFILE is %d", n+100, rl.Cur)
	}
	for range n {
		f, err := os.Open(os.DevNull)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { f.Close() })
	}
	pid := os.Getpid()
	var ours, plain time.Duration
	for b.Loop() {
		t := time.Now()
		if held, err := holdsInode(pid, 1); err != nil || held {
			b.Fatal(held, err)
		}
		ours += time.Since(t)
		t = time.Now()
		readlinkAll(b, pid)
		plain += time.Since(t)
	}
	b.ReportMetric(float64(ours.Nanoseconds())/float64(b.N)/n, "ns/fd")
	b.ReportMetric(float64(ours)/float64(plain), "x-readlink")
}

// readlinkAll reads every descriptor link of pid with os.Readlink.
func readlinkAll(b *testing.B, pid int) {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd"
	f, err := os.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	fds, err := f.Readdirnames(-1)
	if err != nil {
		b.Fatal(err)
	}
	for _, fd := range fds {
		os.Readlink(dir + "/" + fd)
	}
}
