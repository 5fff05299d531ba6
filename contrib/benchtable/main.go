// Command benchtable reads the output of `go test -bench` (as `make bench`
// writes it) and prints the one summary table of the performance goals:
// each figure with its goal, what this run measured and whether the goal
// was met. A missed goal is reported, not fatal: benchtable exits 0
// unless its input cannot be read. A figure whose benchmark did not run
// (skipped, failed, or filtered out) shows "not measured".
//
// Every figure is a ratio (or bound) measured within one run, so it holds
// on a busy machine; see docs/benchmarks.md for what each one compares.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// check is one bound on one metric of one benchmark.
type check struct {
	bench, unit string
	atMost      bool // the metric must be ≤ goal; else ≥ goal
	goal        float64
	show        func(float64) string
	// label names the metric in the table when two checks of a figure
	// share a unit; "" shows the unit.
	label string
}

func (c check) name() string {
	if c.label != "" {
		return c.label
	}
	return c.unit
}

// figure is one row of the table: met when every check holds.
type figure struct {
	name, goal string
	checks     []check
}

func ratio(v float64) string  { return fmt.Sprintf("%.2f×", v) }
func count(v float64) string  { return fmt.Sprintf("%.0f", v) }
func millis(v float64) string { return fmt.Sprintf("%.1f ms", v) }
func nanos(v float64) string  { return fmt.Sprintf("%.2f ms", v/1e6) }
func kib(v float64) string    { return fmt.Sprintf("%.0f KiB", v/1024) }

// figures are the goals of the performance issue, in its order.
var figures = []figure{
	{"fan-out, 10 observers: events/s vs the paired no-observer flood", "≥ 0.8×, 0 lost places", []check{
		{"BenchmarkFanout/observers=10", "events/s-vs-baseline", false, 0.8, ratio, ""},
		{"BenchmarkFanout/observers=10", "lost/flood", true, 0, count, ""},
	}},
	{"fan-out, 100 observers", "≥ 0.5×, 0 lost places; p99 ≤ 10 ms at a paced 1,000 deltas/s", []check{
		{"BenchmarkFanout/observers=100", "events/s-vs-baseline", false, 0.5, ratio, ""},
		{"BenchmarkFanout/observers=100", "lost/flood", true, 0, count, ""},
		{"BenchmarkFanout/observers=100+paced", "p99-ms", true, 10, millis, ""},
	}},
	{"stalled observer (100 observers + 1 that never reads)", "detached within a bounded number of events and bytes, every flood", []check{
		// The benchmark fails unless the stalled observer was detached in
		// every flood; these say how much it had been sent by then.
		{"BenchmarkFanout/observers=100+stalled", "stalled-events", true, 16384, count, ""},
		{"BenchmarkFanout/observers=100+stalled", "stalled-bytes", true, 64 << 20, kib, ""},
	}},
	{"force stop of 200 processes (half setsid) vs bare cgroup.kill + populated 0", "≤ 1.5× (whole stop with its proof)", []check{
		{"BenchmarkForceStop200", "x-stop-vs-bare", true, 1.5, ratio, ""},
	}},
	{"cold connect → welcome through socket activation vs an activated Go echo", "≤ 1.2×", []check{
		{"BenchmarkColdConnect", "x-vs-echo", true, 1.2, ratio, ""},
	}},
	{"launch in a scope vs systemd-run --user --scope", "≤ 1.1×", []check{
		{"BenchmarkLaunchVsSystemdRun", "x-vs-systemd-run", true, 1.1, ratio, ""},
	}},
	{"first history page of a 10 MB session vs a bare line split: its first page, and its newest (what an observer is sent first)", "≤ 10×", []check{
		{"BenchmarkRead10MB", "x-scanner", true, 10, ratio, "first page x-scanner"},
		{"BenchmarkNewest10MB", "x-scanner", true, 10, ratio, "newest page x-scanner"},
	}},
	{"follow (next page after an append) of that session vs a bare line split", "≤ 2×", []check{
		{"BenchmarkFollow10MB", "x-scanner", true, 2, ratio, ""},
	}},
	{"attach frame on a 2,000-message transcript", "≤ 5 ms and ≤ 1 MB per frame", []check{
		// The first frame wraps every message once; later frames are what
		// a delta or a key costs.
		{"BenchmarkScreenRender", "cold-frame-ms", true, 5, millis, ""},
		{"BenchmarkScreenRender", "cold-frame-B", true, 1 << 20, kib, ""},
		{"BenchmarkScreenRender", "ns/op", true, 5e6, nanos, ""},
		{"BenchmarkScreenRender", "B/op", true, 1 << 20, kib, ""},
	}},
}

func main() {
	in := io.Reader(os.Stdin)
	if len(os.Args) > 1 {
		f, err := os.Open(os.Args[1])
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchtable:", err)
			os.Exit(2)
		}
		defer f.Close()
		in = f
	}
	metrics, failed, err := parse(in)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(2)
	}
	fmt.Print(table(metrics, failed))
}

// procs is the -GOMAXPROCS suffix go test adds to a benchmark's name.
var procs = regexp.MustCompile(`-\d+$`)

// parse reads benchmark result lines into metrics[bench][unit] (the last
// line of a benchmark wins) and notes the benchmarks that failed.
func parse(r io.Reader) (metrics map[string]map[string]float64, failed []string, err error) {
	metrics = map[string]map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if name, ok := strings.CutPrefix(strings.TrimSpace(line), "--- FAIL: Benchmark"); ok {
			failed = append(failed, "Benchmark"+strings.Fields(name)[0])
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue // not a result line (a log line that starts so)
		}
		name := procs.ReplaceAllString(f[0], "")
		m := map[string]float64{}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				break
			}
			m[f[i+1]] = v
		}
		metrics[name] = m
	}
	return metrics, failed, sc.Err()
}

// table lays out the figures and the benchmarks that failed.
func table(metrics map[string]map[string]float64, failed []string) string {
	var b strings.Builder
	b.WriteString("\nperformance goals (ratios within this run; docs/benchmarks.md says what each compares)\n\n")
	fmt.Fprintf(&b, "| %s | %s | %s | %s |\n|---|---|---|---|\n", "figure", "goal", "measured", "verdict")
	met := 0
	for _, fg := range figures {
		var got []string
		missed, unmeasured := false, false
		for _, c := range fg.checks {
			v, ok := metrics[c.bench][c.unit]
			if !ok {
				got = append(got, fmt.Sprintf("%s: not measured", c.name()))
				unmeasured = true
				continue
			}
			got = append(got, fmt.Sprintf("%s %s", c.name(), c.show(v)))
			missed = missed || (c.atMost && v > c.goal) || (!c.atMost && v < c.goal)
		}
		verdict := "met" // a missed bound outranks one not measured
		switch {
		case missed:
			verdict = "missed"
		case unmeasured:
			verdict = "not measured"
		}
		if verdict == "met" {
			met++
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", fg.name, fg.goal, strings.Join(got, "; "), verdict)
	}
	fmt.Fprintf(&b, "\n%d of %d goals met.\n", met, len(figures))
	if len(failed) > 0 {
		fmt.Fprintf(&b, "benchmarks that broke: %s\n", strings.Join(failed, ", "))
	}
	return b.String()
}
