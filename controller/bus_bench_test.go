package controller

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/protocol"
)

// BenchmarkFanout publishes text deltas as fast as one producer can to 0,
// 1, 10 and 100 observers that keep up, plus one stalled observer that
// never reads (it must lose its place, not slow anyone). It reports events
// per second and p50/p99 publish-to-delivery latency, and the throughput
// ratio against the run with no observers, measured in the same process.
func BenchmarkFanout(b *testing.B) {
	base := 0.0
	for _, n := range []int{0, 1, 10, 100} {
		b.Run(fmt.Sprintf("observers=%d+stalled", n), func(b *testing.B) {
			eps, p50, p99 := fanout(b, n, b.N)
			if n == 0 {
				base = eps
			}
			b.ReportMetric(eps, "events/s")
			b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
			b.ReportMetric(float64(p99.Microseconds()), "p99-µs")
			if base > 0 {
				b.ReportMetric(eps/base, "x-vs-no-observers")
			}
		})
	}
}

func fanout(b *testing.B, observers, events int) (eps float64, p50, p99 time.Duration) {
	bus := newBus()
	bus.reset("e1")
	bus.subscribe(0) // a stalled observer: never read, it must lose its place
	var wg sync.WaitGroup
	lat := make([][]time.Duration, observers)
	for i := range observers {
		_, s, _ := bus.subscribe(0)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for line := range s.ch {
				var ev protocol.Event
				if json.Unmarshal(line, &ev) != nil {
					continue
				}
				sent, _ := strconv.ParseInt(ev.Text, 10, 64)
				lat[i] = append(lat[i], time.Duration(time.Now().UnixNano()-sent))
			}
		}()
		defer bus.unsubscribe(s)
	}
	b.ResetTimer()
	start := time.Now()
	for seq := 1; seq <= events; seq++ {
		bus.publish(protocol.Event{Record: protocol.RecordEvent, Kind: protocol.EventTextDelta, Execution: "e1",
			Seq: uint64(seq), Text: strconv.FormatInt(time.Now().UnixNano(), 10)})
	}
	elapsed := time.Since(start)
	b.StopTimer()
	bus.mu.Lock()
	for s := range bus.subs {
		delete(bus.subs, s)
		s.done = true
		close(s.ch)
	}
	bus.mu.Unlock()
	wg.Wait()
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	if len(all) > 0 {
		p50, p99 = all[len(all)/2], all[len(all)*99/100]
	}
	return float64(events) / elapsed.Seconds(), p50, p99
}
