package claude

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestScanMemoryIsBoundedByTheFile: a read of a transcript of blank or
// tiny lines (each skipped or bookkeeping) holds a small multiple of the file's
// size at most, not some three hundred bytes of decoded line for each of
// its lines, and a blank line allocates nothing: a file of a million
// LFs, one of half as many CRLFs and one of a third as many "{}" lines,
// read in parallel.
func TestScanMemoryIsBoundedByTheFile(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	}
	const size = 1 << 20
	for name, body := range map[string]string{
		"LFs":  strings.Repeat("\n", size),
		"CRLF": strings.Repeat("\r\n", size/2),
		"{}s":  strings.Repeat("{}\n", size/3),
	} {
		t.Run(name, func(t *testing.T) {
			ref, _ := setup(t, func(string) string { return body })
			var tr *Transcript
			var err error
			held, churn := peakLive(func() { tr, err = Read(ref) })
			if err != nil {
				t.Fatal(err)
			}
			if tr.Bookkeeping != strings.Count(body, "{}") || tr.lines != strings.Count(body, "\n") {
				t.Fatalf("read %d lines, %d bookkeeping, of %q...", tr.lines, tr.Bookkeeping, body[:8])
			}
			if held > 16*uint64(len(body)) {
				t.Errorf("a read of %d bytes held %d bytes at once", len(body), held)
			}
			if !strings.Contains(body, "{}") && churn > 8*uint64(len(body)) {
				t.Errorf("a read of %d bytes of blank lines allocated %d bytes", len(body), churn)
			}
		})
	}
}

// peakLive runs f and returns the most heap found live at a collection
// while it ran, above what was live before, and what f allocated. The
// collector runs every few percent of growth, so what f holds at once is
// seen.
func peakLive(f func()) (held, allocated uint64) {
	defer debug.SetGCPercent(debug.SetGCPercent(5))
	runtime.GC()
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(sample)
	base, allocs := sample[0].Value.Uint64(), sample[1].Value.Uint64()
	var peak atomic.Uint64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Microsecond):
			}
		}
	}()
	f()
	metrics.Read(sample)
	close(stop)
	<-done
	if v := sample[0].Value.Uint64(); v > peak.Load() {
		peak.Store(v)
	}
	return max(peak.Load(), base) - base, sample[1].Value.Uint64() - allocs
}
