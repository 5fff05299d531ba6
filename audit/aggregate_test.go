package audit

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coreos/go-systemd/v22/journal"
)

// sent is what a Logger handed to journald, in order.
type sent struct {
	mu      sync.Mutex
	entries []map[string]string
}

func (s *sent) send(msg string, p journal.Priority, vars map[string]string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := map[string]string{"MESSAGE": msg, "PRIORITY": strconv.Itoa(int(p))}
	for k, v := range vars {
		m[k] = v
	}
	s.entries = append(s.entries, m)
	return nil
}

func (s *sent) all() []map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]string(nil), s.entries...)
}

func newSent(t *testing.T, opts ...Option) (*Logger, *sent) {
	t.Helper()
	s := &sent{}
	return New("pi-test", append([]Option{withSend(s.send)}, opts...)...), s
}

func refusal(conn, code string) Entry {
	return Entry{Event: Refusal, Connection: conn, Peer: &Peer{UID: 1000, PID: 7}, Refusal: code, Message: "refused " + code}
}

// TestFloodIsCounted: 20,000 refusals of one code from one connection,
// then a takeover: the burst is written whole, the rest is one counted
// entry written before the takeover, and the takeover itself is there.
func TestFloodIsCounted(t *testing.T) {
	l, s := newSent(t, WithAggregation(20, time.Hour))
	l.Log(Entry{Event: Connect, Connection: "k-1", Message: "connection k-1"})
	for range 20000 {
		l.Log(refusal("k-1", "bad-json"))
	}
	l.Log(Entry{Event: Takeover, Connection: "k-2", Message: "k-2 controls"})
	got := s.all()
	if len(got) != 1+20+1+1 {
		t.Fatalf("%d entries for a flood of 20,000; want the connect, 20 whole refusals, one count and the takeover", len(got))
	}
	sum, take := got[21], got[22]
	if sum["MOSAIC_EVENT"] != "refusal" || sum["MOSAIC_COUNT"] != "19980" || sum["MOSAIC_REFUSAL"] != "bad-json" ||
		sum["MOSAIC_CONNECTION"] != "k-1" || !strings.Contains(sum["MESSAGE"], "19980 more times") {
		t.Errorf("count entry %v; want refusal bad-json counted 19980 times on k-1", sum)
	}
	if take["MOSAIC_EVENT"] != "takeover" || take["PRIORITY"] != strconv.Itoa(int(journal.PriNotice)) {
		t.Errorf("last entry %v; want the takeover at notice", take)
	}
	if got[1]["PRIORITY"] != strconv.Itoa(int(journal.PriInfo)) {
		t.Errorf("a peer's refusal at priority %s; want info", got[1]["PRIORITY"])
	}
	total := 0
	for _, e := range got {
		if e["MOSAIC_EVENT"] == "refusal" {
			n := 1
			if c := e["MOSAIC_COUNT"]; c != "" {
				n, _ = strconv.Atoi(c)
			}
			total += n
		}
	}
	if total != 20000 {
		t.Errorf("the journal accounts for %d refusals; want all 20,000", total)
	}
}

// TestDecisionsNeverCounted: entries that are not a peer's repeated ones
// are written one by one however many there are.
func TestDecisionsNeverCounted(t *testing.T) {
	l, s := newSent(t, WithAggregation(1, time.Hour))
	for _, ev := range []Event{Takeover, Admission, Transition, Proof, Launch, Confirmation, Receipt, Start, Stop, Foreign} {
		for range 3 {
			l.Log(Entry{Event: ev, Connection: "k-1", Message: string(ev)})
		}
	}
	for range 3 { // a refusal the controller decides by itself: no connection
		l.Log(Entry{Event: Refusal, Refusal: "preflight", Message: "load check failed"})
	}
	if got := s.all(); len(got) != 33 {
		t.Fatalf("%d entries; want all 33 decisions written", len(got))
	}
	for range 3 { // an exact retry dispatches nothing: a peer's repeat
		l.Log(Entry{Event: Receipt, Connection: "k-1", Message: "exact retry", Fields: map[string]string{"RETRY": "true"}})
	}
	if got := s.all(); len(got) != 34 {
		t.Fatalf("%d entries after 3 exact retries; want one written, two counted", len(got))
	}
}

// TestWindowEndWritesCount: a count held back is written when its window
// ends, without any later entry to push it out.
func TestWindowEndWritesCount(t *testing.T) {
	l, s := newSent(t, WithAggregation(2, 20*time.Millisecond))
	for i := range 10 {
		l.Log(refusal("k-"+strconv.Itoa(i%3), "busy"))
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(s.all()) < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	got := s.all()
	if len(got) != 3 || got[2]["MOSAIC_COUNT"] != "8" || got[2]["MOSAIC_CONNECTIONS"] != "k-2, k-0, k-1" || got[2]["MOSAIC_CONNECTION"] != "" {
		t.Fatalf("entries %v; want 2 whole and a count of 8 naming the three connections", got)
	}
	l.Log(refusal("k-9", "busy")) // a new window: written whole again
	if got := s.all(); len(got) != 4 || got[3]["MOSAIC_COUNT"] != "" {
		t.Fatalf("after the window: %v; want the refusal written whole", got[len(got)-1])
	}
}

// TestFlushWritesCounts: Flush (a controller's exit) loses no count.
func TestFlushWritesCounts(t *testing.T) {
	l, s := newSent(t, WithAggregation(1, time.Hour))
	for range 5 {
		l.Log(Entry{Event: Connect, Connection: "k-1"})
		l.Log(Entry{Event: Disconnect, Connection: "k-1"})
	}
	l.Flush()
	got := s.all()
	if len(got) != 4 || got[2]["MOSAIC_COUNT"] != "4" || got[3]["MOSAIC_COUNT"] != "4" {
		t.Fatalf("entries %v; want one connect, one disconnect, then both counts of 4", got)
	}
}

// TestManyCodesBounded: codes beyond maxKeys share one key, so memory is
// bounded whatever codes a peer provokes.
func TestManyCodesBounded(t *testing.T) {
	l, _ := newSent(t, WithAggregation(1, time.Hour))
	for i := range 10 * maxKeys {
		l.Log(refusal("k-1", "code-"+strconv.Itoa(i)))
	}
	if n := len(l.agg.keys); n > maxKeys+1 {
		t.Fatalf("%d keys tracked; want at most %d", n, maxKeys+1)
	}
}

// TestLateWindowKeepsCount: when the next repeat arrives after the window
// ended but before its timer wrote the count, the count is written first,
// never dropped with the old window.
func TestLateWindowKeepsCount(t *testing.T) {
	l, s := newSent(t, WithAggregation(1, time.Hour))
	now := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	l.agg.now = func() time.Time { return now }
	for range 3 {
		l.Log(refusal("k-1", "busy"))
	}
	now = now.Add(2 * time.Hour) // the timer (real time) has not fired
	l.Log(refusal("k-1", "busy"))
	got := s.all()
	if len(got) != 3 || got[1]["MOSAIC_COUNT"] != "2" || got[2]["MOSAIC_COUNT"] != "" {
		t.Fatalf("entries %v; want one whole, the count of 2, then the new window's first whole", got)
	}
}

// TestJournalRetriedAfterFailure: one failed send puts that entry on
// stderr; the next entry goes to the journal again with its fields.
func TestJournalRetriedAfterFailure(t *testing.T) {
	s := &sent{}
	fail := true
	l := New("pi-test", withSend(func(msg string, p journal.Priority, vars map[string]string) error {
		if fail {
			fail = false
			return errors.New("journald restarting")
		}
		return s.send(msg, p, vars)
	}))
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stderr
	os.Stderr = devnull
	l.Log(Entry{Event: Launch, Message: "first"})
	os.Stderr = old
	devnull.Close()
	l.Log(Entry{Event: Launch, Message: "second"})
	if got := s.all(); len(got) != 1 || got[0]["MESSAGE"] != "second" {
		t.Fatalf("journal got %v; want the entry after the failure", got)
	}
}

// TestEngineCausedIsCounted: transitions the engine's output causes
// (Entry.Engine) are counted per kind like a peer's entries, at info, and
// the count names the kind and no connection; a decision stays whole.
func TestEngineCausedIsCounted(t *testing.T) {
	l, s := newSent(t, WithAggregation(5, time.Hour))
	for i := range 1000 {
		l.Log(Entry{Event: Transition, Engine: "approval-opened", Message: "dialog " + strconv.Itoa(i)})
		l.Log(Entry{Event: Transition, Engine: "approval-uncertain", Message: "timed out " + strconv.Itoa(i)})
	}
	l.Log(Entry{Event: Takeover, Connection: "k-2", Message: "k-2 controls"})
	got := s.all()
	if len(got) != 5+5+2+1 {
		t.Fatalf("%d entries for 2,000 engine-caused transitions; want 5 whole of each kind, two counts and the takeover", len(got))
	}
	counts := map[string]string{}
	for _, e := range got[:12] {
		kind := e["MOSAIC_ENGINE_CAUSED"]
		if kind == "" {
			t.Fatalf("entry %v does not say the engine caused it", e)
		}
		if c, ok := e["MOSAIC_COUNT"]; ok {
			counts[kind] = c
			if e["PRIORITY"] != strconv.Itoa(int(journal.PriNotice)) || e["MOSAIC_CONNECTION"] != "" || !strings.Contains(e["MESSAGE"], "the engine caused "+kind) {
				t.Fatalf("count %v", e)
			}
		} else if e["PRIORITY"] != strconv.Itoa(int(journal.PriInfo)) {
			t.Fatalf("engine-caused entry at priority %s, want info: %v", e["PRIORITY"], e)
		}
	}
	if counts["approval-opened"] != "995" || counts["approval-uncertain"] != "995" {
		t.Fatalf("counts %v, want 995 of each kind", counts)
	}
	if last := got[len(got)-1]; last["MOSAIC_EVENT"] != "takeover" || last["PRIORITY"] != strconv.Itoa(int(journal.PriNotice)) {
		t.Fatalf("last entry %v, want the takeover at notice", last)
	}
}
