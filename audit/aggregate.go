package audit

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Defaults of the aggregation: per (event, refusal code), the first Burst
// entries of each Window are written whole. With the few dozen codes the
// controller has, a flood writes at most a few hundred entries per window,
// far below journald's default of 10,000 per 30 s.
const (
	Burst  = 20
	Window = 30 * time.Second
)

// Bounds on the aggregation's own memory: keys tracked at once (further
// codes share one overflow key), and connections named in one summary.
const (
	maxKeys     = 128
	maxNamed    = 8
	overflowKey = "*"
)

// aggKey is what repeats: an event, its refusal code and what of the
// engine's output caused it.
type aggKey struct {
	event  Event
	code   string
	engine string
}

// tally is one key's window: how many were written, how many counted.
type tally struct {
	start   time.Time
	written int
	count   int // counted since the last summary
	first   time.Time
	last    time.Time
	conns   []string // distinct connections among the counted, at most maxNamed
	more    int      // counted entries from connections beyond those named
	peer    *Peer    // the last counted entry's peer
	timer   *time.Timer
}

// aggregator holds the windows. Its methods run under the Logger's mutex.
type aggregator struct {
	burst  int
	window time.Duration
	now    func() time.Time
	keys   map[aggKey]*tally
	ready  []Entry // counts of closed windows not yet written
}

func newAggregator() *aggregator {
	return &aggregator{burst: Burst, window: Window, now: time.Now, keys: map[aggKey]*tally{}}
}

// admit reports whether e is to be written whole; otherwise it is counted,
// and expire (called by the window's timer through onEnd) writes the count.
func (a *aggregator) admit(e Entry, onEnd func(aggKey, *tally)) bool {
	k := aggKey{e.Event, e.Refusal, e.Engine}
	if _, ok := a.keys[k]; !ok && len(a.keys) >= maxKeys {
		k.code, k.engine = overflowKey, ""
	}
	now := a.now()
	t := a.keys[k]
	if t == nil || now.Sub(t.start) >= a.window {
		if t != nil { // its timer has not written the count yet
			a.end(k, t)
		}
		t = &tally{start: now}
		a.keys[k] = t
	}
	if t.written < a.burst {
		t.written++
		return true
	}
	if t.count == 0 {
		t.first = now
	}
	t.count++
	t.last = now
	t.peer = e.Peer
	t.name(e.Connection)
	if t.timer == nil {
		t.timer = time.AfterFunc(t.start.Add(a.window).Sub(now), func() { onEnd(k, t) })
	}
	return false
}

func (t *tally) name(conn string) {
	for _, c := range t.conns {
		if c == conn {
			return
		}
	}
	if len(t.conns) < maxNamed {
		t.conns = append(t.conns, conn)
		return
	}
	t.more++
}

// end closes t, k's window, before a new one starts: its count, if any,
// waits in ready for the Logger to write before anything else.
func (a *aggregator) end(k aggKey, t *tally) {
	if t.timer != nil {
		t.timer.Stop()
	}
	if t.count > 0 {
		a.ready = append(a.ready, summary(k, t, a.window))
	}
}

// expire is t's timer: the window is over, its count is written and the
// key forgotten, unless a later entry already closed t.
func (a *aggregator) expire(k aggKey, t *tally) (Entry, bool) {
	if a.keys[k] != t {
		return Entry{}, false
	}
	delete(a.keys, k)
	if t.count == 0 {
		return Entry{}, false
	}
	return summary(k, t, a.window), true
}

// takeReady returns the counts of windows closed by later entries.
func (a *aggregator) takeReady() []Entry {
	r := a.ready
	a.ready = nil
	return r
}

// drain returns the summaries of everything counted so far, in a stable
// order; the windows go on, so later repeats are still counted.
func (a *aggregator) drain() []Entry {
	out := a.takeReady()
	for _, k := range sortedKeys(a.keys) {
		t := a.keys[k]
		if t.count == 0 {
			continue
		}
		out = append(out, summary(k, t, a.window))
		t.count, t.conns, t.more, t.peer = 0, nil, 0, nil
	}
	return out
}

func sortedKeys(m map[aggKey]*tally) []aggKey {
	ks := make([]aggKey, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	for i := 1; i < len(ks); i++ {
		for j := i; j > 0 && less(ks[j], ks[j-1]); j-- {
			ks[j], ks[j-1] = ks[j-1], ks[j]
		}
	}
	return ks
}

func less(a, b aggKey) bool {
	if a.event != b.event {
		return a.event < b.event
	}
	if a.code != b.code {
		return a.code < b.code
	}
	return a.engine < b.engine
}

// summary is the counted entry: the event, the count, the time span and
// which connections caused it.
func summary(k aggKey, t *tally, window time.Duration) Entry {
	who := strings.Join(t.conns, ", ")
	if t.more > 0 {
		who += fmt.Sprintf(" and %d more", t.more)
	}
	what := map[Event]string{Connect: "connected", Hello: "said hello", Disconnect: "disconnected", Refusal: "refused",
		Receipt: "retried a request exactly"}[k.event]
	if k.code != "" {
		what += " " + k.code
	}
	if k.engine != "" {
		what = "the engine caused " + k.engine
		who = "none (the engine's output)"
	}
	e := Entry{
		Event:   k.event,
		Refusal: k.code,
		Engine:  k.engine,
		Peer:    t.peer,
		Message: fmt.Sprintf("%s %d more times between %s and %s (after the first %d of a %s window; counted, not written one by one): connections %s",
			what, t.count, t.first.UTC().Format(time.RFC3339Nano), t.last.UTC().Format(time.RFC3339Nano), t.written, window, who),
		Fields: map[string]string{
			"COUNT":        strconv.Itoa(t.count),
			"FIRST":        t.first.UTC().Format(time.RFC3339Nano),
			"LAST":         t.last.UTC().Format(time.RFC3339Nano),
			"WINDOW_START": t.start.UTC().Format(time.RFC3339Nano),
			"CONNECTIONS":  who,
		},
	}
	if len(t.conns) == 1 && t.more == 0 {
		e.Connection = t.conns[0]
	}
	return e
}
