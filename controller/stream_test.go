package controller

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	mclient "github.com/mosaic-agents/mosaic/client"
	"github.com/mosaic-agents/mosaic/protocol"
)

// toolScript answers in two blocks (text, then a bash call), then a final
// answer once the tool's result is in.
const toolScript = `{"turns":[{"text":["Let me ","look. "],"tool":{"command":"echo tool-output"}},{"text":["Done ","looking."]}]}`

// libClient dials r's socket with the client library.
func (r *rig) libClient(ctx context.Context) *mclient.Client {
	r.t.Helper()
	c, err := mclient.Dial(ctx, r.sock, mclient.Options{Name: "test"})
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { c.Close() })
	return c
}

// follow feeds c's updates to tr, performing every observe tr asks for (no
// manual refresh), until done holds for its view; it returns the updates.
func follow(t *testing.T, ctx context.Context, c *mclient.Client, tr *mclient.Transcript, done func(mclient.View) bool) []mclient.Update {
	t.Helper()
	var seen []mclient.Update
	for !done(tr.Snapshot()) {
		select {
		case u, ok := <-c.Updates():
			if !ok {
				t.Fatalf("updates closed: %v", c.Err())
			}
			seen = append(seen, u)
			if w := tr.Update(u); w.Observe {
				go c.Reobserve(ctx, w) // the reply arrives on Updates
			}
		case <-ctx.Done():
			t.Fatalf("the view never got there: %s", viewString(tr.Snapshot()))
		}
	}
	return seen
}

// viewString lists a view's events as seq:kind and its markers.
func viewString(v mclient.View) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s seam=%q:", v.Execution, v.SeamMarker)
	for _, e := range v.Events {
		fmt.Fprintf(&b, " %d:%s", e.Seq, e.Kind)
	}
	if v.TailMarker != "" {
		fmt.Fprintf(&b, " <%s+%d>", v.TailMarker, v.Held)
	}
	return b.String()
}

// settledClean is a view holding n run-settled events and no marker.
func settledClean(n int) func(mclient.View) bool {
	return func(v mclient.View) bool {
		got := 0
		for _, e := range v.Events {
			if e.Kind == protocol.EventRunSettled {
				got++
			}
		}
		return got >= n && v.TailMarker == ""
	}
}

func kinds(v mclient.View, k protocol.EventKind) []protocol.Event {
	var out []protocol.Event
	for _, e := range v.Events {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

// E3 on the real controller: a final message in two blocks is one
// message-end (part 0, last part, replace) whose blocks are the text and
// the tool call; events carry no request correlation; a duplicate
// delivery (a resume that replays what the client holds) is dropped as an
// identical repeat.
func TestStreamFinalsAndDuplicates(t *testing.T) {
	r := newRig(t, toolScript, nil)
	r.waitBinding("active")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := r.libClient(ctx)
	tr := mclient.NewTranscript()
	if _, err := c.Reobserve(ctx, tr.Pending()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Takeover(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Prompt(ctx, "look"); err != nil {
		t.Fatal(err)
	}
	seen := follow(t, ctx, c, tr, settledClean(1))
	v := tr.Snapshot()
	var two *protocol.Event
	for _, e := range kinds(v, protocol.EventMessageEnd) {
		if e.Role == "assistant" && len(e.Content) == 2 {
			two = &e
		}
	}
	if two == nil || two.Content[0].Type != "text" || two.Content[0].Text != "Let me look. " ||
		two.Content[1].Type != "toolCall" || two.Content[1].ToolName != "bash" ||
		two.Part == nil || *two.Part != 0 || !two.LastPart || two.UpdateMode != protocol.UpdateReplace {
		t.Fatalf("no final assistant message of two blocks (text, toolCall) as part 0 of 0: %s", viewString(v))
	}
	for _, u := range seen {
		if u.Event != nil && bytes.Contains(u.Raw, []byte(`"request"`)) {
			t.Fatalf("an event carries a request correlation: %s", u.Raw)
		}
	}

	// Duplicate delivery: resume from seq 2 though the view holds more.
	held := len(v.Events)
	if o, err := c.ObserveFrom(ctx, 2); err != nil || o.Seam.ReplayStart != 3 {
		t.Fatalf("ObserveFrom(2): %v; seam %+v; want the replay to start at 3", err, o.Seam)
	}
	var repeats int
	for repeats < held-2 {
		select {
		case u := <-c.Updates():
			if w := tr.Update(u); w.Observe {
				t.Fatalf("a duplicate delivery asked for %+v", w)
			}
			if u.Event != nil && u.Event.Seq <= uint64(held) {
				repeats++
			}
		case <-ctx.Done():
			t.Fatalf("the replay delivered %d of %d repeats", repeats, held-2)
		}
	}
	if after := tr.Snapshot(); len(after.Events) != held || after.TailMarker != "" {
		t.Fatalf("after the duplicates: %s; want the same %d events", viewString(after), held)
	}
}

// E4 on the real controller: a page read while a run is visible overlaps
// the replay of that run (a seam marker, re-read after run-settled, which
// clears it with the page holding everything once); a client that falls
// behind (here its own update queue) has a gap, resumes from the
// controller's replay window and ends contiguous; a new execution is a new
// epoch, observed afresh, never concatenated.
func TestStreamOverlapGapEpoch(t *testing.T) {
	r := newRig(t, toolScript, nil)
	r.waitBinding("active")
	fc := r.fakeControl()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ctl := r.libClient(ctx)
	if _, err := ctl.WaitBound(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := ctl.Takeover(ctx); err != nil {
		t.Fatal(err)
	}
	// Overlap: the first assistant message is on disk and in the replay.
	if err := fc.Arm(ctx, "after-tool-end"); err != nil {
		t.Fatal(err)
	}
	if _, err := ctl.Prompt(ctx, "look"); err != nil {
		t.Fatal(err)
	}
	if _, err := fc.Wait(ctx, "after-tool-end"); err != nil {
		t.Fatal(err)
	}
	obs := r.libClient(ctx)
	tr := mclient.NewTranscript()
	cut, err := obs.Reobserve(ctx, tr.Pending())
	if err != nil {
		t.Fatal(err)
	}
	follow(t, ctx, obs, tr, func(v mclient.View) bool { return len(kinds(v, protocol.EventToolEnd)) == 1 })
	v := tr.Snapshot()
	if cut.Seam.Quiet || len(v.Events) == 0 || v.Events[0].Seq != cut.Seam.ReplayStart {
		t.Fatalf("a cut mid-run (quiet %v) names replayStart %d; the replay began with %s", cut.Seam.Quiet, cut.Seam.ReplayStart, viewString(v))
	}
	if v.SeamMarker != mclient.ReasonNotQuiet || !bytes.Contains(v.History, []byte("Let me look. ")) {
		t.Fatalf("a page cut mid-run: seam %q, page holds the first answer %v; want a marker and the overlap",
			v.SeamMarker, bytes.Contains(v.History, []byte("Let me look. ")))
	}
	if err := fc.Release(ctx, "after-tool-end"); err != nil {
		t.Fatal(err)
	}
	follow(t, ctx, obs, tr, func(v mclient.View) bool { return v.SeamMarker == "" && v.TailMarker == "" })
	v = tr.Snapshot()
	if n := bytes.Count(v.History, []byte("Let me look. ")); n != 1 || !bytes.Contains(v.History, []byte("Done looking.")) || len(v.Events) != 0 {
		t.Fatalf("after the quiet re-read: first answer %d times in the page, final answer there %v, %s",
			n, bytes.Contains(v.History, []byte("Done looking.")), viewString(v))
	}

	// Gap: a client whose queue holds 2 events reads nothing while a
	// turn streams, then catches up through the replay window.
	slow, err := mclient.Dial(ctx, r.sock, mclient.Options{QueueEvents: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	if o, err := slow.Observe(ctx); err != nil || !o.Seam.Quiet || o.Seam.ReplayStart != o.Seam.ReplayUntil+1 {
		t.Fatalf("a quiet observe: %v; seam %+v; want replayStart just after the window", err, o.Seam)
	}
	if _, err := ctl.Prompt(ctx, "again"); err != nil {
		t.Fatal(err)
	}
	follow(t, ctx, obs, tr, settledClean(1)) // the observer's view: the turn is over
	str := mclient.NewTranscript()
	seen := follow(t, ctx, slow, str, settledClean(1))
	var lost bool
	for _, u := range seen {
		lost = lost || (u.Notice != nil && u.Notice.Kind == protocol.NoticeLostPlace)
	}
	sv, ov := str.Snapshot(), tr.Snapshot()
	if !lost || viewString(sv) != viewString(ov) {
		t.Fatalf("the slow client (lost place %v) ended with %s; the observer with %s", lost, viewString(sv), viewString(ov))
	}

	// New epoch: stop, recover, launch; the transcript re-reads.
	old := r.execution()
	if _, err := ctl.ForceStop(ctx, ""); err != nil {
		t.Fatal(err)
	}
	el, err := ctl.Recover(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ctl.Launch(ctx, el.ID); err != nil {
		t.Fatal(err)
	}
	follow(t, ctx, obs, tr, func(v mclient.View) bool { return v.Execution != old && v.TailMarker == "" })
	if v := tr.Snapshot(); v.Execution != r.execution() || len(v.Events) != 0 || !bytes.Contains(v.History, []byte("Done looking.")) {
		t.Fatalf("after the launch: %s (page has the history: %v); want the new execution, no old events",
			viewString(v), bytes.Contains(v.History, []byte("Done looking.")))
	}
}

// E6 on the real controller: the engine pauses while its tool runs; the
// client disconnects, the tool's result and the final answer arrive while
// it is away, and the reconnected client resumes from the last seq it
// holds: the replay brings them once each, contiguous, with no marker and
// no fresh page (no manual refresh).
func TestToolResultAcrossReconnect(t *testing.T) {
	r := newRig(t, toolScript, nil)
	r.waitBinding("active")
	fc := r.fakeControl()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := fc.Arm(ctx, "tool-running"); err != nil {
		t.Fatal(err)
	}
	a := r.libClient(ctx)
	tr := mclient.NewTranscript()
	if _, err := a.Reobserve(ctx, tr.Pending()); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Takeover(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Prompt(ctx, "look"); err != nil {
		t.Fatal(err)
	}
	follow(t, ctx, a, tr, func(v mclient.View) bool { return len(kinds(v, protocol.EventToolStart)) == 1 })
	if _, err := fc.Wait(ctx, "tool-running"); err != nil {
		t.Fatal(err)
	}
	page := tr.Snapshot().History
	a.Close()
	// The result and the final answer arrive while nobody is connected.
	if err := fc.Release(ctx, "tool-running"); err != nil {
		t.Fatal(err)
	}
	r.waitBindingField("engineState", "idle")
	b, err := a.Reconnect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.ObserveFrom(ctx, tr.Next()-1); err != nil {
		t.Fatal(err)
	}
	seen := follow(t, ctx, b, tr, settledClean(1))
	for _, u := range seen {
		if u.Observed != nil && u.FromSeq == nil {
			t.Fatal("the transcript needed a fresh page: the resume was not clean")
		}
	}
	v := tr.Snapshot()
	ends := kinds(v, protocol.EventToolEnd)
	if len(ends) != 1 || !bytes.Contains(ends[0].Tool.Result, []byte("tool-output")) || len(kinds(v, protocol.EventToolStart)) != 1 {
		t.Fatalf("tool events after the reconnect: %s", viewString(v))
	}
	var final bool
	for _, e := range kinds(v, protocol.EventMessageEnd) {
		final = final || (len(e.Content) == 1 && e.Content[0].Text == "Done looking.")
	}
	if !final || v.SeamMarker != "" || v.TailMarker != "" || !bytes.Equal(v.History, page) {
		t.Fatalf("after the reconnect: final answer %v, %s; want it once, no marker, the same page", final, viewString(v))
	}
	for i, e := range v.Events {
		if e.Seq != v.From+uint64(i) {
			t.Fatalf("events not contiguous at %d: %s", i, viewString(v))
		}
	}
}
