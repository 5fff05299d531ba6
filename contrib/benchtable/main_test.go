package main

import (
	"strings"
	"testing"
)

// TestTable: result lines become metrics (the -N suffix dropped), each
// figure gets met, missed or not measured, and a failed benchmark is
// named.
func TestTable(t *testing.T) {
	out := `goos: linux
BenchmarkFanout/observers=10-2   	       2	 371516929 ns/op	     0.9 events/s-vs-baseline	         0 lost/flood
BenchmarkFanout/observers=100-2  	       2	 371516929 ns/op	     0.2 events/s-vs-baseline	         0 lost/flood	  3 p99-ms
--- FAIL: BenchmarkFanout/observers=100+stalled
BenchmarkRead10MB-2   	       2	  1000 ns/op	  7.5 x-scanner
BenchmarkNewest10MB-2   	       2	  1000 ns/op	  9.5 x-scanner
`
	m, failed, err := parse(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if got := m["BenchmarkFanout/observers=100"]["events/s-vs-baseline"]; got != 0.2 {
		t.Fatalf("parsed %v", m)
	}
	tab := table(m, failed)
	for _, want := range []string{
		"| fan-out, 10 observers: events/s vs the paired no-observer flood | ≥ 0.8×, 0 lost places | events/s-vs-baseline 0.90×; lost/flood 0 | met |",
		"events/s-vs-baseline 0.20×; lost/flood 0; p99-ms: not measured | missed |",
		"first page x-scanner 7.50×; newest page x-scanner 9.50× | met |",
		"| attach frame on a 2,000-message transcript | ≤ 5 ms and ≤ 1 MB per frame | cold-frame-ms: not measured; cold-frame-B: not measured; ns/op: not measured; B/op: not measured | not measured |",
		"2 of 9 goals met.",
		"benchmarks that broke: BenchmarkFanout/observers=100+stalled",
	} {
		if !strings.Contains(tab, want) {
			t.Fatalf("table lacks %q:\n%s", want, tab)
		}
	}
}
