package controller

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	mclient "github.com/mosaic-agents/mosaic/client"
	"github.com/mosaic-agents/mosaic/contrib/fakepi"
	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/protocol"
)

// floodDeltas is how many text deltas one flood streams.
const floodDeltas = 3000

// stalledDeltas is the flood of the stalled case: past maxLag by more
// than its socket buffer (~1100 events) and its writer's batch
// (batchEvents) hold back, so it loses its place within every flood.
const stalledDeltas = maxLag + 4000

// pacedDeltas at pacedRate per second is the paced flood: an engine
// streaming fast but not flat out, where latency rather than backlog is
// what an observer sees.
const (
	pacedDeltas = 1000
	pacedRate   = 1000
)

// floodWait bounds one flood, its observers' setup and the stalled
// observer's verdict, so a broken controller fails the benchmark instead
// of hanging it.
const floodWait = 60 * time.Second

// BenchmarkFanout is the fan-out benchmark of the controller: the fake Pi
// (FAKEPI_FLOOD) streams floodDeltas text deltas as fast as it can write,
// each stamped with its write time, through the real controller and
// engine adapter to 0, 1, 10 and 100 observers that are real socket
// clients (the client library, strict decoding), and to 100 plus one
// stalled observer that never reads. Every op of a sub-benchmark is a
// baseline flood with no observers (the controller's own bus, seen by an
// in-process probe, is the only reader) followed by the same flood with
// the observers, so each ratio compares two floods of the same engine, a
// moment apart. Metrics:
//
//   - events/s: deltas divided by the time from the first delta's write to
//     the last delta reaching the slowest observer that kept up (for the
//     baseline: reaching the controller's bus);
//   - engine-events/s: the engine's own write rate, from the stamps of the
//     final message;
//   - p50-ms, p99-ms: write-to-delivery latency over every delta and
//     observer (the baseline: write to the bus);
//   - *-vs-baseline: the observed flood over its paired baseline;
//   - lost: how often observers (not the stalled one) lost their place per
//     flood; each then resumes from the controller's replay window, as a
//     client does, so every observer still receives every delta.
//
// The stalled observer must lose its place (a lost-place notice, or the
// connection dropped as too slow) or the benchmark fails; stalled-events
// is how many events it had been sent when it was detached. The paced
// case streams pacedDeltas at pacedRate per second instead of flat out,
// for the latency an observer sees when it is not backlog. Nothing here
// asserts a time: the numbers are reported, not judged.
func BenchmarkFanout(b *testing.B) {
	sandboxtest.Require(b)
	sandboxtest.Bin(b, "fakepi")
	cases := []struct {
		name      string
		observers int
		stalled   bool
		flood     string // FAKEPI_FLOOD
	}{
		{"observers=0", 0, false, strconv.Itoa(floodDeltas)},
		{"observers=1", 1, false, strconv.Itoa(floodDeltas)},
		{"observers=10", 10, false, strconv.Itoa(floodDeltas)},
		{"observers=100", 100, false, strconv.Itoa(floodDeltas)},
		{"observers=100+stalled", 100, true, strconv.Itoa(stalledDeltas)},
		{"observers=100+paced", 100, false, fmt.Sprintf("%d@%d", pacedDeltas, pacedRate)},
	}
	rows := make([]string, len(cases))
	for i, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			f := newFanoutRig(b, tc.flood)
			f.flood(b, 0, false) // warm-up: the first run pays for the lazy session write
			var base, obs floodStats
			b.ResetTimer()
			for range b.N {
				base.add(f.flood(b, 0, false))
				if tc.observers > 0 {
					obs.add(f.flood(b, tc.observers, tc.stalled))
				}
			}
			b.StopTimer()
			rows[i] = fanoutReport(b, tc.name, base, obs, tc.observers > 0)
		})
	}
	// On stdout rather than b.Log: a parent benchmark's log shows only
	// with -v, and a sub-benchmark's repeats for every round of b.N.
	fmt.Println(fanoutTable(rows))
}

// fanoutTable lays out the rows measured so far.
func fanoutTable(rows []string) string {
	head := fmt.Sprintf("%-22s %9s %9s %9s %9s %9s %7s %7s %7s %7s %s", "",
		"base/s", "events/s", "engine/s", "p50-ms", "p99-ms", "x-ev/s", "x-p50", "x-p99", "lost/fl", "stalled observer")
	var ran []string
	for _, r := range rows {
		if r != "" {
			ran = append(ran, r)
		}
	}
	return fmt.Sprintf("fan-out of %d text deltas per flood (%d with the stalled observer; %d at %d/s paced),\n"+
		"through the real controller to socket clients; x-* are against base/s, the paired floods with no observers\n%s\n%s",
		floodDeltas, stalledDeltas, pacedDeltas, pacedRate, head, strings.Join(ran, "\n"))
}

// fanoutReport sends the metrics of one sub-benchmark and returns its
// table row. Without observers the baseline floods are the result.
func fanoutReport(b *testing.B, name string, base, obs floodStats, observed bool) string {
	if !observed {
		obs = base
	}
	bp50, bp99 := base.percentiles()
	p50, p99 := obs.percentiles()
	xev, x50, x99 := obs.eventsPerSec()/base.eventsPerSec(), float64(p50)/float64(bp50), float64(p99)/float64(bp99)
	b.ReportMetric(obs.eventsPerSec(), "events/s")
	b.ReportMetric(obs.enginePerSec(), "engine-events/s")
	b.ReportMetric(millis(p50), "p50-ms")
	b.ReportMetric(millis(p99), "p99-ms")
	if observed {
		b.ReportMetric(xev, "events/s-vs-baseline")
		b.ReportMetric(x50, "p50-vs-baseline")
		b.ReportMetric(x99, "p99-vs-baseline")
		b.ReportMetric(obs.lostPerFlood(), "lost/flood")
	}
	stalled := "-"
	if len(obs.stalled) > 0 {
		stalled = fmt.Sprintf("%s, after at most %d events (%d KiB)", strings.Join(obs.stalled, "; "), obs.stalledMax, obs.stalledBytes>>10)
		b.ReportMetric(float64(obs.stalledMax), "stalled-events")
		b.ReportMetric(float64(obs.stalledBytes), "stalled-bytes")
	}
	return fmt.Sprintf("%-22s %9.0f %9.0f %9.0f %9.2f %9.2f %7.3f %7.1f %7.1f %7.1f %s", name,
		base.eventsPerSec(), obs.eventsPerSec(), obs.enginePerSec(), millis(p50), millis(p99),
		xev, x50, x99, obs.lostPerFlood(), stalled)
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// floodResult is what one flood measured.
type floodResult struct {
	first, last time.Time       // write stamps of the first and last delta
	delivered   time.Time       // the last delta reached its slowest reader
	latencies   []time.Duration // write to delivery, every delta and reader
	lost        int             // times readers lost their place
	stalled     string          // how the stalled observer ended, "" if none
	stalledN    int             // events the stalled observer was sent
	stalledB    int             // and their bytes
	deltas      int
}

// floodStats adds up the floods of one sub-benchmark.
type floodStats struct {
	floods, deltas  int
	engine, deliver time.Duration
	latencies       []time.Duration
	lost            int
	stalled         []string
	stalledMax      int // most events sent to a stalled observer
	stalledBytes    int // most bytes of them
}

func (s *floodStats) add(r floodResult) {
	s.floods++
	s.deltas += r.deltas
	s.stalledMax = max(s.stalledMax, r.stalledN)
	s.stalledBytes = max(s.stalledBytes, r.stalledB)
	s.engine += r.last.Sub(r.first)
	s.deliver += r.delivered.Sub(r.first)
	s.latencies = append(s.latencies, r.latencies...)
	s.lost += r.lost
	if r.stalled != "" && !slices.Contains(s.stalled, r.stalled) {
		s.stalled = append(s.stalled, r.stalled)
	}
}

func (s *floodStats) eventsPerSec() float64 { return float64(s.deltas) / s.deliver.Seconds() }
func (s *floodStats) enginePerSec() float64 { return float64(s.deltas) / s.engine.Seconds() }

func (s *floodStats) lostPerFlood() float64 { return float64(s.lost) / float64(s.floods) }

func (s *floodStats) percentiles() (p50, p99 time.Duration) {
	if len(s.latencies) == 0 {
		return 0, 0
	}
	slices.Sort(s.latencies)
	return s.latencies[len(s.latencies)/2], s.latencies[len(s.latencies)*99/100]
}

// fanoutRig is a controller in this process over the flooding fake Pi in
// a real scope, served on a Unix socket, with one raw control connection
// that never observes (so it is nobody's observer).
type fanoutRig struct {
	*rig    // ctrl and sock only: its t is unset, so only killAll, generation and execution are used
	session string
	ctl     net.Conn
	ctlIn   *bufio.Reader
	gen     float64
	deltas  int // per flood
}

func newFanoutRig(b *testing.B, flood string) *fanoutRig {
	b.Helper()
	r := newRig(b, `{"turns":[]}`, func(cfg *Config) {
		spec := cfg.Spec
		cfg.Spec = func(cv *conversations.Conversation) (engine.Spec, error) {
			s, err := spec(cv)
			s.Env = append(s.Env, fakepi.EnvFlood+"="+flood)
			return s, err
		}
	})
	n, _, _ := strings.Cut(flood, "@")
	f := &fanoutRig{rig: r, session: r.session}
	f.deltas, _ = strconv.Atoi(n)
	f.takeControl(b)
	return f
}

// takeControl waits for the engine, connects the control connection and
// takes over.
func (f *fanoutRig) takeControl(b *testing.B) {
	b.Helper()
	deadline := time.Now().Add(floodWait)
	for f.execution() == "" || f.binding() != protocol.BindingActive {
		if time.Now().After(deadline) {
			b.Fatalf("binding is %s, want active", f.binding())
		}
		time.Sleep(10 * time.Millisecond)
	}
	c, err := net.Dial("unix", f.sock)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	f.ctl, f.ctlIn = c, bufio.NewReaderSize(c, 1<<20)
	f.call(b, map[string]any{"type": "hello", "client": "bench-control"}, "welcome")
	m := f.call(b, map[string]any{"type": "takeover", "request": newID("t-"), "generation": f.generation()}, "control")
	f.gen = m["generation"].(float64)
}

func (f *fanoutRig) binding() string {
	f.ctrl.mu.Lock()
	defer f.ctrl.mu.Unlock()
	return f.ctrl.bindingLocked().State
}

// call writes one command on the control connection and returns the
// record that answers it, which must be of kind want.
func (f *fanoutRig) call(b *testing.B, cmd map[string]any, want string) map[string]any {
	b.Helper()
	m := f.answer(b, cmd)
	if m["record"] != want {
		b.Fatalf("%v: got %v, want a %s", cmd["type"], m, want)
	}
	return m
}

// answer writes one command on the control connection and returns the
// record that answers it: the one with its request id, or the welcome.
func (f *fanoutRig) answer(b *testing.B, cmd map[string]any) map[string]any {
	b.Helper()
	line, _ := json.Marshal(cmd)
	f.ctl.SetDeadline(time.Now().Add(floodWait))
	if _, err := f.ctl.Write(append(line, '\n')); err != nil {
		b.Fatalf("control write: %v", err)
	}
	for {
		raw, err := f.ctlIn.ReadBytes('\n')
		if err != nil {
			b.Fatalf("control read: %v", err)
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			b.Fatalf("control record %q: %v", raw, err)
		}
		if m["record"] == "welcome" || (m["request"] == cmd["request"] && m["record"] != "binding" && m["record"] != "stop") {
			return m
		}
	}
}

// prompt starts one flood. A refusal for busy means the previous run has
// not settled in the engine adapter yet; it is asked again.
func (f *fanoutRig) prompt(b *testing.B) {
	b.Helper()
	for {
		m := f.answer(b, map[string]any{"type": "prompt", "request": newID("p-"), "generation": f.gen, "execution": f.execution(), "text": "flood"})
		switch {
		case m["record"] == "receipt" && (m["state"] == protocol.ReceiptAcknowledged || m["state"] == protocol.ReceiptQueued):
			return
		case m["record"] == "refusal" && m["code"] == protocol.CodeBusy:
			time.Sleep(5 * time.Millisecond)
		default:
			b.Fatalf("prompt: %v", m)
		}
	}
}

// flood attaches the readers, runs one flood and measures it. With no
// observers the reader is an in-process probe on the controller's bus.
func (f *fanoutRig) flood(b *testing.B, observers int, stalled bool) floodResult {
	b.Helper()
	b.StopTimer()
	var readers []*floodReader
	if observers == 0 {
		readers = append(readers, f.probe())
	} else {
		readers = f.observers(b, observers)
	}
	var stall net.Conn
	if stalled {
		stall = f.stalledObserver(b)
	}
	b.StartTimer()
	f.prompt(b)
	timeout := time.After(floodWait)
	for _, r := range readers {
		select {
		case <-r.done:
		case <-timeout:
			b.Fatalf("flood did not reach every reader within %v", floodWait)
		}
	}
	b.StopTimer()
	defer b.StartTimer()
	res := floodResult{deltas: f.deltas}
	for _, r := range readers {
		r.close()
		if r.err != nil {
			b.Fatal(r.err)
		}
		if r.n != f.deltas {
			b.Fatalf("a reader got %d deltas, want %d", r.n, f.deltas)
		}
		res.lost += r.lost
		res.latencies = append(res.latencies, r.latencies...)
		if r.lastAt.After(res.delivered) {
			res.delivered = r.lastAt
		}
	}
	stamps := f.lastAnswer(b)
	res.first, res.last = stamps[0], stamps[len(stamps)-1]
	if stall != nil {
		res.stalled, res.stalledN, res.stalledB = stalledVerdict(b, stall)
	}
	return res
}

// floodReader is one reader of a flood: it times every stamped delta.
type floodReader struct {
	n         int
	latencies []time.Duration
	lastAt    time.Time
	lost      int    // times it lost its place and resumed
	next      uint64 // the seq it expects next, 0 before the first event
	err       error
	done      chan struct{}
	close     func()
}

func newFloodReader(deltas int, close func()) *floodReader {
	return &floodReader{latencies: make([]time.Duration, 0, deltas), done: make(chan struct{}), close: close}
}

// event takes one event received at now and says whether the run has
// settled. A replay after a lost place may repeat what was already read;
// a gap means events were lost for good.
func (r *floodReader) event(ev *protocol.Event, now time.Time) (settled bool) {
	if ev.Texts == nil {
		return r.delta(ev.Seq, ev.Kind, ev.Text, now)
	}
	// A run (the observers ask for runs, as attach and the web do): each
	// of its deltas is checked and timed as a single one would be.
	for i, text := range ev.Texts {
		if r.delta(ev.Seq+uint64(i), ev.Kind, text, now) {
			return true
		}
	}
	return false
}

// delta takes the event of seq: in order, without a gap, and timed from
// the stamp its text carries.
func (r *floodReader) delta(seq uint64, kind protocol.EventKind, text string, now time.Time) (settled bool) {
	if r.next != 0 && seq < r.next {
		return false
	}
	if r.next != 0 && seq > r.next {
		r.err = fmt.Errorf("events %d to %d never arrived", r.next, seq-1)
		return true
	}
	r.next = seq + 1
	switch kind {
	case protocol.EventTextDelta:
		ns, ok := stamp(text)
		if !ok {
			return false
		}
		r.n++
		r.latencies = append(r.latencies, now.Sub(time.Unix(0, ns)))
		r.lastAt = now
	case protocol.EventRunSettled:
		return true
	}
	return false
}

// stamp reads the write time a flood's delta carries: its decimal
// Unix nanoseconds and a space (contrib/fakepi/flood.go). It is the
// benchmark's own cost per delta and delivery, so it parses only that
// form, without strconv's generality.
func stamp(text string) (int64, bool) {
	if len(text) < 2 || len(text) > 20 || text[len(text)-1] != ' ' {
		return 0, false
	}
	var n int64
	for i := 0; i < len(text)-1; i++ {
		c := text[i] - '0'
		if c > 9 {
			return 0, false
		}
		n = n*10 + int64(c)
	}
	return n, true
}

// probe subscribes in process to the controller's bus: the baseline's
// only reader, with no socket and no client between. It takes batches
// from its cursor as a connection's writer does and decodes every line.
// Should it lose its place it resumes from the bus's ring, as an observer
// would.
func (f *fanoutRig) probe() *floodReader {
	bus := f.ctrl.bus
	_, _, until := bus.window()
	wake := make(chan struct{}, 1)
	s, _, _ := bus.subscribeFrom(until, wake)
	var mu sync.Mutex
	r := newFloodReader(f.deltas, func() { // called once the reader is done
		mu.Lock()
		defer mu.Unlock()
		bus.unsubscribe(s)
	})
	take := func(line []byte) bool {
		now := time.Now()
		var ev protocol.Event
		if err := json.Unmarshal(line, &ev); err != nil {
			r.err = err
			return true
		}
		return r.event(&ev, now)
	}
	go func() {
		defer close(r.done)
		var pieces []piece
		for range wake {
			var lost uint64
			if pieces, lost = bus.take(s, pieces[:0]); lost != 0 {
				r.lost++
				if r.next == 0 {
					r.err = fmt.Errorf("the baseline probe lost its place before the first event")
					return
				}
				var complete bool
				mu.Lock()
				s, _, complete = bus.subscribeFrom(r.next-1, wake)
				mu.Unlock()
				if !complete {
					r.err = fmt.Errorf("the baseline probe lost events %d on, beyond the replay window", r.next)
					return
				}
				continue
			}
			for _, p := range pieces {
				if take(p.line) {
					return
				}
			}
		}
	}()
	return r
}

// observers connects n client-library observers, a few at a time.
func (f *fanoutRig) observers(b *testing.B, n int) []*floodReader {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), floodWait)
	defer cancel()
	readers := make([]*floodReader, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	gate := make(chan struct{}, 8)
	for i := range n {
		wg.Go(func() {
			gate <- struct{}{}
			defer func() { <-gate }()
			readers[i], errs[i] = f.observer(ctx)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			b.Fatalf("observer %d: %v", i, err)
		}
	}
	return readers
}

func (f *fanoutRig) observer(ctx context.Context) (*floodReader, error) {
	c, err := mclient.Dial(ctx, f.sock, mclient.Options{Name: "bench-observer", Runs: true})
	if err != nil {
		return nil, err
	}
	if _, err := c.Observe(ctx); err != nil {
		c.Close()
		return nil, err
	}
	r := newFloodReader(f.deltas, func() { c.Close() })
	go func() {
		defer close(r.done)
		for u := range c.Updates() {
			now := time.Now()
			switch {
			case u.Event != nil:
				if r.event(u.Event, now) {
					return
				}
			case u.Notice != nil && u.Notice.Kind == protocol.NoticeLostPlace:
				// As a client does: resume after the last event held,
				// from the controller's replay window.
				r.lost++
				if err := r.resume(c); err != nil {
					r.err = err
					return
				}
			}
		}
		r.err = fmt.Errorf("observer connection ended: %v", c.Err())
	}()
	return r, nil
}

// resume observes again after the last event r holds.
func (r *floodReader) resume(c *mclient.Client) error {
	if r.next == 0 {
		return fmt.Errorf("lost its place before the first event")
	}
	ctx, cancel := context.WithTimeout(context.Background(), floodWait)
	defer cancel()
	if _, err := c.ObserveFrom(ctx, r.next-1); err != nil {
		return fmt.Errorf("resume after a lost place: %w", err)
	}
	return nil
}

// stalledObserver connects and observes, reads up to the observed reply
// and then never reads again until the flood is over.
func (f *fanoutRig) stalledObserver(b *testing.B) net.Conn {
	b.Helper()
	c, err := net.Dial("unix", f.sock)
	if err != nil {
		b.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(floodWait))
	if _, err := c.Write([]byte(`{"type":"hello","client":"bench-stalled"}` + "\n" + `{"type":"observe","request":"stalled"}` + "\n")); err != nil {
		b.Fatal(err)
	}
	in := bufio.NewReader(c)
	for {
		line, err := in.ReadBytes('\n')
		if err != nil {
			b.Fatalf("stalled observer before the flood: %v", err)
		}
		if strings.Contains(string(line), `"record":"observed"`) {
			return c
		}
	}
}

// stalledVerdict reads what the stalled observer was sent after the
// flood: it must have lost its place, by a lost-place notice or by being
// dropped as too slow. Keeping its place would mean it held the flood back.
// It returns how it ended and the events (and their bytes) it was sent.
func stalledVerdict(b *testing.B, c net.Conn) (verdict string, events, size int) {
	b.Helper()
	defer c.Close()
	c.SetDeadline(time.Now().Add(floodWait))
	in := bufio.NewReaderSize(c, 1<<20)
	for {
		line, err := in.ReadBytes('\n')
		if errors.Is(err, os.ErrDeadlineExceeded) {
			b.Fatalf("the stalled observer heard neither a lost-place notice nor a close within %v (%d events)", floodWait, events)
		}
		if err != nil {
			return "dropped as too slow", events, size
		}
		var m struct {
			Record string `json:"record"`
			Kind   string `json:"kind"`
		}
		json.Unmarshal(line, &m)
		switch {
		case m.Record == "notice" && m.Kind == protocol.NoticeLostPlace:
			return "lost its place", events, size
		case m.Record == "event" && m.Kind == string(protocol.EventRunSettled):
			b.Fatalf("the stalled observer kept its place through the flood (%d events)", events)
		case m.Record == "event":
			events++
			size += len(line)
		}
	}
}

// lastAnswer returns the write stamps of the last assistant message in the
// session file, which the fake writes before its message_end: all
// f.deltas of them, in write order.
func (f *fanoutRig) lastAnswer(b *testing.B) []time.Time {
	b.Helper()
	raw, err := os.ReadFile(f.session)
	if err != nil {
		b.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		var e struct {
			Message struct {
				Role    string `json:"role"`
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"message"`
		}
		if json.Unmarshal([]byte(lines[i]), &e) != nil || e.Message.Role != "assistant" || len(e.Message.Content) == 0 {
			continue
		}
		var stamps []time.Time
		for _, s := range strings.Fields(e.Message.Content[0].Text) {
			ns, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				b.Fatalf("flood text %q: %v", s, err)
			}
			stamps = append(stamps, time.Unix(0, ns))
		}
		if len(stamps) != f.deltas {
			b.Fatalf("the last answer holds %d stamps, want %d", len(stamps), f.deltas)
		}
		return stamps
	}
	b.Fatalf("no assistant message in %s", f.session)
	return nil
}
