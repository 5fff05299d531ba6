package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	mclient "github.com/mosaic-agents/mosaic/client"
	"github.com/mosaic-agents/mosaic/contrib/fakepi"
	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/protocol"
)

// TestRunsOnlyWhereAsked: a flood of deltas to two observers that fall
// behind, one whose hello named protocol 2 and one that named none. The
// first gets runs of deltas, the second never does; both get every delta
// in order, and their transcripts are the same.
func TestRunsOnlyWhereAsked(t *testing.T) {
	const deltas = 4000
	r := newRig(t, `{"turns":[]}`, func(cfg *Config) {
		spec := cfg.Spec
		cfg.Spec = func(cv *conversations.Conversation) (engine.Spec, error) {
			s, err := spec(cv)
			s.Env = append(s.Env, fakepi.EnvFlood+"="+itoa(deltas))
			return s, err
		}
	})
	r.waitBinding("active")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	type reader struct {
		c      *mclient.Client
		tr     *mclient.Transcript
		runs   int
		deltas int
		next   uint64
		text   strings.Builder
	}
	var readers []*reader
	for _, runs := range []bool{true, false} {
		c, err := mclient.Dial(ctx, r.sock, mclient.Options{Name: "runs-test", Runs: runs, QueueEvents: 4 * deltas})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if want := map[bool]int{true: 2, false: 1}[runs]; c.Welcome().Protocol != want {
			t.Fatalf("Runs %v: the welcome names protocol %d, want %d", runs, c.Welcome().Protocol, want)
		}
		if _, err := c.Observe(ctx); err != nil {
			t.Fatal(err)
		}
		readers = append(readers, &reader{c: c, tr: mclient.NewTranscript()})
	}
	if _, err := readers[0].c.Takeover(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := readers[0].c.Prompt(ctx, "flood"); err != nil {
		t.Fatal(err)
	}
	// Neither reads until the engine has written every delta: both fall
	// behind, and a writer then has many deltas to take at once.
	for {
		if _, _, until := r.ctrl.bus.window(); until > deltas {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the controller's bus never held %d events", deltas)
		}
		time.Sleep(5 * time.Millisecond)
	}
	for i, rd := range readers {
		for settled := false; !settled; {
			var u mclient.Update
			select {
			case u = <-rd.c.Updates():
			case <-ctx.Done():
				t.Fatalf("reader %d: %v before the run settled", i, ctx.Err())
			}
			rd.tr.Update(u)
			if u.Event == nil {
				continue
			}
			if u.Event.IsRun() {
				rd.runs++
			}
			for d := range u.Event.Deltas() {
				if d.Kind == protocol.EventRunSettled {
					settled = true
				}
				if d.Kind != protocol.EventTextDelta {
					continue
				}
				if rd.next != 0 && d.Seq != rd.next {
					t.Fatalf("reader %d: delta seq %d after %d", i, d.Seq, rd.next-1)
				}
				rd.next = d.Seq + 1
				rd.deltas++
				rd.text.WriteString(d.Text)
			}
		}
	}
	withRuns, without := readers[0], readers[1]
	if withRuns.runs == 0 || without.runs != 0 {
		t.Fatalf("runs: %d to the connection that asked, %d to the one that did not", withRuns.runs, without.runs)
	}
	if withRuns.deltas < deltas || without.deltas != withRuns.deltas || withRuns.text.String() != without.text.String() {
		t.Fatalf("deltas %d and %d, want the same, at least %d; same text: %v", withRuns.deltas, without.deltas, deltas,
			withRuns.text.String() == without.text.String())
	}
	a, b := withRuns.tr.Snapshot(), without.tr.Snapshot()
	if len(a.Events) != len(b.Events) || len(a.Events) < deltas {
		t.Fatalf("transcripts hold %d and %d events, want the same, at least %d", len(a.Events), len(b.Events), deltas)
	}
	for i := range a.Events {
		if string(canonicalOf(t, a.Events[i])) != string(canonicalOf(t, b.Events[i])) {
			t.Fatalf("transcripts differ at event %d", i)
		}
	}
	t.Logf("%d deltas in %d runs and singles", deltas, withRuns.runs)
}

func canonicalOf(t *testing.T, e protocol.Event) []byte {
	t.Helper()
	line, err := protocol.Line(e)
	if err != nil {
		t.Fatal(err)
	}
	return line
}
