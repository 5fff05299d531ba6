package pi

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/protocol"
)

// scriptedEngine answers every get_state on in with a response line on
// out, after writing pre (what sat in the pipe when the reader joined).
// streaming is what its get_state answers say; after the first answer it
// writes tail.
func scriptedEngine(t *testing.T, pre string, streaming bool, tail string) (io.Reader, io.WriteCloser) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	go func() {
		defer outW.Close()
		if pre != "" {
			outW.Write([]byte(pre))
		}
		sc := bufio.NewScanner(inR)
		n := 0
		for sc.Scan() {
			var c struct{ Type, ID string }
			json.Unmarshal(sc.Bytes(), &c)
			b, _ := json.Marshal(map[string]any{"id": c.ID, "type": "response", "command": c.Type, "success": true,
				"data": map[string]any{"sessionFile": "/s", "sessionId": "x", "isStreaming": streaming}})
			outW.Write(append(b, '\n'))
			if n++; n == 2 && tail != "" {
				outW.Write([]byte(tail))
			}
		}
	}()
	t.Cleanup(func() { inR.Close(); outR.Close() })
	return outR, inW
}

// TestResyncNeverParsesAHalfLine: a reader joining a running engine's
// stdout skips everything up to the first LF, even a tail that is valid
// JSON and would mean something else as a line, and still reaches the
// engine's state when the engine is idle and writes nothing by itself.
func TestResyncNeverParsesAHalfLine(t *testing.T) {
	for _, tc := range []struct {
		name, pre   string
		streaming   bool
		tail        string
		wantRunning bool
		wantSkipped int64
	}{
		// The tail of a message_update whose text was a JSON line.
		{name: "tail that parses", pre: `{"type":"agent_start"}` + "\n", streaming: false, wantSkipped: 23},
		{name: "tail without LF yet", pre: `"text":"half`, streaming: true, wantRunning: true},
		{name: "idle engine, empty pipe", pre: "", streaming: false},
		{name: "run ends after the join", pre: `x"}` + "\n", streaming: true,
			tail: `{"type":"agent_end","messages":[],"willRetry":false}` + "\n" + `{"type":"agent_settled"}` + "\n", wantSkipped: 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, w := scriptedEngine(t, tc.pre, tc.streaming, tc.tail)
			c, err := New(r, w, engine.Options{Execution: "e-1", Resume: true, SeqBase: 1 << 32, IDPrefix: "r1.", CommandTimeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			var events []protocol.Event
			done := make(chan struct{})
			go func() {
				defer close(done)
				for e := range c.Events() {
					events = append(events, e)
				}
			}()
			st, skipped, err := c.Resync(context.Background(), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if st.IsStreaming != tc.streaming {
				t.Fatalf("state %+v", st)
			}
			if tc.wantSkipped > 0 && skipped != tc.wantSkipped {
				t.Errorf("skipped %d bytes, want %d", skipped, tc.wantSkipped)
			}
			if tc.pre == "" && skipped == 0 {
				t.Errorf("an idle engine's first line (the probe's answer) must be skipped too; skipped 0")
			}
			if tc.tail != "" {
				deadline := time.Now().Add(5 * time.Second)
				for c.State().Settles == 0 && time.Now().Before(deadline) {
					time.Sleep(5 * time.Millisecond)
				}
			}
			ts := c.State()
			if ts.Running != tc.wantRunning || ts.Uncertain {
				t.Fatalf("tracker %+v; want running %v", ts, tc.wantRunning)
			}
			if ts.Runs != 0 {
				t.Fatalf("the tracker counted %d run starts: a half line was parsed", ts.Runs)
			}
			w.Close()
			<-done
			for _, e := range events {
				if e.Seq <= 1<<32 {
					t.Errorf("event seq %d is not above the base", e.Seq)
				}
				if e.Kind == protocol.EventUnavailable && strings.Contains(e.Native, "response") {
					t.Errorf("uncorrelated response %+v", e)
				}
			}
		})
	}
}
