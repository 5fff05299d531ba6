package client

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/protocol"
)

// follow feeds c's updates to tr, performing each observe it asks for, until
// done holds for its view. Reobserve runs on the goroutine that drains
// Updates: the reply reaches it without anyone else reading.
func follow(t *testing.T, c *Client, tr *Transcript, done func(View) bool) []Update {
	t.Helper()
	ctx := testContext(t)
	var seen []Update
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for !done(tr.Snapshot()) {
		select {
		case u, ok := <-c.Updates():
			if !ok {
				t.Fatalf("updates closed: %v", c.Err())
			}
			seen = append(seen, u)
			if w := tr.Update(u); w.Observe {
				if _, err := c.Reobserve(ctx, w); err != nil {
					t.Fatalf("reobserve %+v: %v", w, err)
				}
			}
		case <-timer.C:
			t.Fatalf("view never got there: %s", seqs(tr.Snapshot()))
		}
	}
	return seen
}

// seqs lists a view's event seqs and markers, e.g. "x-1: 1 2 3 <gap+1>".
func seqs(v View) string {
	var b strings.Builder
	b.WriteString(v.Execution + ":")
	for _, e := range v.Events {
		fmt.Fprintf(&b, " %d", e.Seq)
	}
	if v.TailMarker != "" {
		fmt.Fprintf(&b, " <%s+%d>", v.TailMarker, v.Held)
	}
	return b.String()
}

func clean(n int) func(View) bool {
	return func(v View) bool { return v.TailMarker == "" && len(v.Events) == n }
}

func TestLostPlaceResumes(t *testing.T) {
	f := newFake(t, nil)
	c := dial(t, f, Options{})
	tr := NewTranscript()
	if _, err := c.Reobserve(testContext(t), tr.Pending()); err != nil {
		t.Fatal(err)
	}
	f.publish(3)
	follow(t, c, tr, clean(3))

	f.losePlace(c.State().Connection)
	f.publish(3) // not sent: the connection lost its place
	seen := follow(t, c, tr, clean(6))
	if got := seqs(tr.Snapshot()); got != "x-1: 1 2 3 4 5 6" {
		t.Fatalf("after resume: %s", got)
	}
	var resumed bool
	for _, u := range seen {
		if u.Observed != nil && u.FromSeq != nil && *u.FromSeq == 3 {
			resumed = true
		}
	}
	if !resumed {
		t.Fatal("the transcript did not resume with fromSeq 3")
	}
}

func TestQueueOverflowLosesPlace(t *testing.T) {
	f := newFake(t, nil)
	c := dial(t, f, Options{QueueEvents: 4})
	tr := NewTranscript()
	ctx := testContext(t)
	if _, err := c.Observe(ctx); err != nil {
		t.Fatal(err)
	}
	f.publish(10)
	// Nobody reads Updates, and replies still arrive: this one is read after
	// the ten events, so they have all been queued or dropped by now.
	if _, err := c.Takeover(ctx); err != nil {
		t.Fatal(err)
	}
	seen := follow(t, c, tr, clean(10))
	var local bool
	for _, u := range seen {
		if u.Notice != nil && u.Notice.Kind == protocol.NoticeLostPlace && bytes.Contains(u.Notice.Detail, []byte(`"local":true`)) {
			local = true
		}
	}
	if !local {
		t.Fatal("no local lost-place notice")
	}
	if got := seqs(tr.Snapshot()); got != "x-1: 1 2 3 4 5 6 7 8 9 10" {
		t.Fatalf("after resume: %s", got)
	}
}

func TestObserverAndControllerSeeOneStream(t *testing.T) {
	f := newFake(t, nil)
	a, b := dial(t, f, Options{}), dial(t, f, Options{})
	ta, tb := NewTranscript(), NewTranscript()
	ctx := testContext(t)
	for _, c := range []*Client{a, b} {
		if _, err := c.Observe(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Takeover(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Prompt(ctx, "hello"); err != nil {
		t.Fatal(err)
	}
	f.publish(5)
	follow(t, a, ta, clean(5))
	follow(t, b, tb, clean(5))
	va, vb := ta.Snapshot(), tb.Snapshot()
	for i := range va.Events {
		if string(canonical(va.Events[i])) != string(canonical(vb.Events[i])) {
			t.Fatalf("event %d differs: %+v vs %+v", i, va.Events[i], vb.Events[i])
		}
	}
}

func TestNewExecutionAfterLaunch(t *testing.T) {
	f := newFake(t, nil)
	c := dial(t, f, Options{})
	tr := NewTranscript()
	ctx := testContext(t)
	if _, err := c.Reobserve(ctx, tr.Pending()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Takeover(ctx); err != nil {
		t.Fatal(err)
	}
	f.publish(2)
	follow(t, c, tr, clean(2))
	if _, err := c.ForceStop(ctx, ""); err != nil {
		t.Fatal(err)
	}
	el, err := c.Recover(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Launch(ctx, el.ID); err != nil {
		t.Fatal(err)
	}
	// The binding names the new execution: the transcript re-reads.
	follow(t, c, tr, func(v View) bool { return v.Execution == "x-2" && clean(0)(v) })
	f.publish(1)
	follow(t, c, tr, clean(1))
	if got := seqs(tr.Snapshot()); got != "x-2: 1" {
		t.Fatalf("new epoch: %s", got)
	}
}

func TestCutThatIsNotQuiet(t *testing.T) {
	f := newFake(t, nil)
	f.publish(2)
	f.settle() // seq 3
	f.setQuiet(false)
	f.publish(2) // seqs 4, 5: the running turn
	c := dial(t, f, Options{})
	tr := NewTranscript()
	if _, err := c.Reobserve(testContext(t), tr.Pending()); err != nil {
		t.Fatal(err)
	}
	follow(t, c, tr, func(v View) bool { return len(v.Events) == 2 })
	v := tr.Snapshot()
	if got := seqs(v); got != "x-1: 4 5" || v.SeamMarker != ReasonNotQuiet || v.From != 4 {
		t.Fatalf("replay of the running turn: %s, seam %q, from %d", got, v.SeamMarker, v.From)
	}
	// The run settles: the transcript re-reads, quietly this time.
	f.settle()
	follow(t, c, tr, func(v View) bool { return v.SeamMarker == "" })
	if v := tr.Snapshot(); len(v.Events) != 0 || v.From != 7 {
		t.Fatalf("after the quiet re-read: %s, from %d", seqs(v), v.From)
	}
}
