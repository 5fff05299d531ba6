package claude

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/protocol"
)

// canUse is a can_use_tool request as the CLI re-sends it inside an
// initialize answer (DIGEST §3: the whole original frame).
const canUse = `{"type":"control_request","request_id":"1d0f1f8b-aaaa-4bbb-8ccc-dddddddddddd","request":{"subtype":"can_use_tool","tool_name":"Bash","display_name":"Bash","input":{"command":"touch x"},"description":"touch x","permission_suggestions":[],"tool_use_id":"toolu_fake_009"}}`

func initAnswer(id, state, pending string) string {
	return `{"type":"control_response","response":{"subtype":"success","request_id":"` + id + `","response":{"pid":7,"session_state":"` + state + `"},"pending_permission_requests":[` + pending + `],"pending_user_dialog_requests":[]}}`
}

// TestResyncTurnInProgress: a controller re-attached to a running CLI
// never parses the tail of a line an earlier reader began, numbers its
// events and control ids apart from the earlier reader's, takes the turn
// in progress and the permission request still pending from the second
// initialize's answer (the shape the CLI gives after a reconnect), refuses
// a prompt while that turn runs, and sees it settle at its result.
func TestResyncTurnInProgress(t *testing.T) {
	p := newPeerOpts(t, engine.Options{Execution: "x1", CommandTimeout: 5 * time.Second, Resume: true, SeqBase: 1 << 32, IDPrefix: "r1."})
	type out struct {
		r       Resumed
		skipped int64
		err     error
	}
	done := make(chan out, 1)
	go func() {
		r, n, err := p.c.Resync(context.Background(), 5*time.Second)
		done <- out{r, n, err}
	}()
	probe := p.read()
	pid, _ := probe["request_id"].(string)
	if !strings.HasPrefix(pid, "r1.") {
		t.Fatalf("probe id %q lacks the re-attach prefix", pid)
	}
	// The tail of a line the dead controller had begun to read, then the
	// probe's own answer: neither may be taken for a frame of ours.
	p.send(`_use","request_id":"zz","request":{"subtype":"can_use_tool"}}`, initAnswer(pid, "idle", ""))
	seed := p.read()
	sid, _ := seed["request_id"].(string)
	if sid == pid || seed["request"].(map[string]any)["subtype"] != "initialize" {
		t.Fatalf("second frame %v; want another initialize", seed)
	}
	p.send(initAnswer(sid, "requires_action", canUse))
	got := <-done
	if got.err != nil {
		t.Fatal(got.err)
	}
	if got.skipped == 0 || !got.r.Running || len(got.r.Pending) != 1 || got.r.Pending[0].ToolUseID != "toolu_fake_009" {
		t.Fatalf("resync: %+v, skipped %d; want a running turn with the one pending request", got.r, got.skipped)
	}
	if ds := p.c.Decisions(); len(ds) != 1 || pairOf(ds[0].ID) != "1d0f1f8b-aaaa-4bbb-8ccc-dddddddddddd/toolu_fake_009" {
		t.Fatalf("decisions %+v; the half line's request must not be one", ds)
	}
	if !p.c.Turn().Running {
		t.Fatal("the turn in progress is not running")
	}
	_, err := p.c.Prompt(context.Background(), "next")
	wantCode(t, err, protocol.CodeBusy)
	p.send(result)
	e := p.event("run-settled", func(e protocol.Event) bool { return e.Kind == protocol.EventRunSettled })
	if e.Seq <= 1<<32 {
		t.Fatalf("event seq %d is not after the re-attach base", e.Seq)
	}
	for p.c.Turn().Running {
		time.Sleep(time.Millisecond)
	}
}

// TestResyncUnknownState: an initialize answer whose session_state is
// none the CLI was seen to give is not taken for idle.
func TestResyncUnknownState(t *testing.T) {
	p := newPeerOpts(t, engine.Options{Execution: "x1", CommandTimeout: 5 * time.Second, Resume: true, IDPrefix: "r1."})
	done := make(chan error, 1)
	go func() { _, _, err := p.c.Resync(context.Background(), 5*time.Second); done <- err }()
	probe := p.read()
	p.send(initAnswer(probe["request_id"].(string), "idle", ""))
	seed := p.read()
	p.send(initAnswer(seed["request_id"].(string), "compacting", ""))
	if err := <-done; err == nil || !strings.Contains(err.Error(), "compacting") {
		t.Fatalf("resync with an unknown session_state: %v", err)
	}
}

// TestResyncCutRequestDenyOnly: a permission request the CLI re-sends in
// an initialize answer whose line framing had to cut offers deny only,
// as a live one does (TestCutRequestDenyOnly): allow would send the cut
// input back as updatedInput, and the CLI would run a command the model
// never asked for. On a build that took every re-sent request as whole,
// allow-once was offered and written with the cut command.
func TestResyncCutRequestDenyOnly(t *testing.T) {
	p := newPeerOpts(t, engine.Options{Execution: "x1", MaxLine: 4096, CommandTimeout: 5 * time.Second, Resume: true, SeqBase: 1 << 32, IDPrefix: "r1."})
	done := make(chan error, 1)
	go func() {
		_, _, err := p.c.Resync(context.Background(), 5*time.Second)
		done <- err
	}()
	probe := p.read()
	p.send(initAnswer(probe["request_id"].(string), "idle", ""))
	seed := p.read()
	cmd := "echo " + strings.Repeat("A", 2<<20) + " && rm -rf ~/important"
	pending := strings.Replace(canUse, `"touch x"},"description"`, `"`+cmd+`"},"description"`, 1)
	p.send(initAnswer(seed["request_id"].(string), "requires_action", pending))
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ds := p.c.Decisions()
	if len(ds) != 1 {
		t.Fatalf("decisions %+v; want the one re-sent request", ds)
	}
	if len(ds[0].Choices) != 1 || ds[0].Choices[0] != engine.ChoiceDeny {
		t.Fatalf("a re-sent request whose line was cut offers %v; want deny only", ds[0].Choices)
	}
	wantCode(t, p.c.Decide(context.Background(), ds[0].ID, engine.ChoiceAllowOnce), protocol.CodeUnsupported)
}

// reask is a can_use_tool request as one JSON frame (no LF), the way the
// CLI re-sends it inside an initialize answer.
func reask(requestID, toolUseID string) string {
	return strings.TrimSuffix(askLine(requestID, toolUseID, "touch "+requestID), "\n")
}

// errorAnswers reads what the Conn writes until it is quiet, having seen
// an answer to every id in want, and counts the control responses per
// request id; any other write, or an answer that is not an error, fails.
func errorAnswers(t *testing.T, p *peer, want map[string]int) map[string]int {
	t.Helper()
	got := map[string]int{}
	missing := func() bool {
		for id := range want {
			if got[id] == 0 {
				return true
			}
		}
		return false
	}
	for {
		var m map[string]any
		if missing() {
			m = p.read()
		} else {
			select {
			case m = <-p.in:
				<-p.line
			case <-time.After(200 * time.Millisecond):
				return got
			}
		}
		resp, _ := m["response"].(map[string]any)
		if m["type"] != "control_response" || resp == nil {
			t.Fatalf("the Conn wrote %v; want only answers", m)
		}
		id, _ := resp["request_id"].(string)
		if resp["subtype"] != "error" || resp["error"] == "" {
			if body, _ := resp["response"].(map[string]any); body["behavior"] != "deny" {
				t.Fatalf("answer %v; want an error or a deny", m)
			}
		}
		got[id]++
	}
}

// TestResentRefusedRequestAnswered: a permission request the CLI re-sends
// in an initialize answer (after a re-attach, or at launch) that the
// bounds refuse is answered with an error, as the same request refused
// live is: the CLI waits on it as on a live one, and before, nothing
// answered it, so the CLI waited for ever. Each request id is answered
// at most once: a refused one listed twice, one refused live and then
// re-sent, and one denied and forgotten and then re-sent get their one
// answer and no second.
func TestResentRefusedRequestAnswered(t *testing.T) {
	long := strings.Repeat("x", maxNativeID+1)
	full := make([]string, 0, maxDecisions+1)
	for i := range maxDecisions + 1 {
		full = append(full, reask(fmt.Sprint("p", i), fmt.Sprint("tu-p", i)))
	}
	for _, tc := range []struct {
		name string
		// live is sent before the initialize answer that re-sends
		// pending; its answers are counted with the rest.
		live    func(t *testing.T, p *peer)
		pending []string
		answers map[string]int // error or deny answers per request id
		kept    int
		notKept string // a decision id never kept again
	}{
		{name: "tool use id past the bound", pending: []string{reask("r1", long)}, answers: map[string]int{"r1": 1}},
		// Never echoed whole, nor cut (it could name another request):
		// left unanswered, the turn uncertain.
		{name: "request id past the bound", pending: []string{reask(long, "tu-1")}, answers: map[string]int{}},
		{name: "decision id of another", pending: []string{reask("r/x", "t"), reask("r", "x/t")}, answers: map[string]int{"r": 1}, kept: 1},
		{name: "past the count", pending: full, answers: map[string]int{fmt.Sprint("p", maxDecisions): 1}, kept: maxDecisions},
		{name: "refused twice in one answer", pending: []string{reask("r1", long), reask("r1", long)}, answers: map[string]int{"r1": 1}},
		{name: "refused live, then re-sent", live: func(t *testing.T, p *peer) {
			p.send(reask("r1", long))
		}, pending: []string{reask("r1", long)}, answers: map[string]int{"r1": 1}},
		{name: "unsupported asked twice", live: func(t *testing.T, p *peer) {
			p.send(`{"type":"control_request","request_id":"u1","request":{"subtype":"zz"}}`,
				`{"type":"control_request","request_id":"u1","request":{"subtype":"zz"}}`)
		}, answers: map[string]int{"u1": 1}},
		{name: "denied and forgotten, then re-sent", live: func(t *testing.T, p *peer) {
			ch := p.c.Changed()
			p.send(reask("r0", "tu-r0"))
			<-ch
			if err := p.c.Decide(context.Background(), p.c.Decisions()[0].ID, engine.ChoiceDeny); err != nil {
				t.Fatal(err)
			}
			// Every kept request pending pushes the denied one out.
			p.send(full[:maxDecisions]...)
			for slices.ContainsFunc(p.c.Decisions(), func(d engine.NativeDecision) bool { return pairOf(d.ID) == "r0/tu-r0" }) {
				time.Sleep(time.Millisecond)
			}
		}, pending: []string{reask("r0", "tu-r0")}, answers: map[string]int{"r0": 1}, kept: maxDecisions},
		{name: "denied and forgotten, then re-sent with room", live: func(t *testing.T, p *peer) {
			ch := p.c.Changed()
			p.send(reask("r0", "tu-r0"))
			<-ch
			if err := p.c.Decide(context.Background(), p.c.Decisions()[0].ID, engine.ChoiceDeny); err != nil {
				t.Fatal(err)
			}
			// p0 withdrawn leaves room for one; p255 pushes the denied
			// r0 out, the oldest settled.
			p.send(full[0], `{"type":"control_cancel_request","request_id":"p0"}`)
			p.send(full[1:maxDecisions]...)
			for slices.ContainsFunc(p.c.Decisions(), func(d engine.NativeDecision) bool { return pairOf(d.ID) == "r0/tu-r0" }) {
				time.Sleep(time.Millisecond)
			}
		}, pending: []string{reask("r0", "tu-r0")}, answers: map[string]int{"r0": 1}, kept: maxDecisions, notKept: "r0/tu-r0"},
	} {
		for _, path := range []string{"resync", "initialize"} {
			t.Run(tc.name+"/"+path, func(t *testing.T) {
				p := newPeerOpts(t, engine.Options{Execution: "x1", CommandTimeout: 5 * time.Second, Resume: path == "resync", IDPrefix: "r1."})
				done := make(chan error, 1)
				go func() {
					var err error
					if path == "resync" {
						_, _, err = p.c.Resync(context.Background(), 5*time.Second)
					} else {
						_, err = p.c.Initialize(context.Background())
					}
					done <- err
				}()
				init := p.read()
				if path == "resync" {
					p.send(initAnswer(init["request_id"].(string), "idle", ""))
					init = p.read()
				}
				if tc.live != nil {
					tc.live(t, p)
				}
				p.send(initAnswer(init["request_id"].(string), "requires_action", strings.Join(tc.pending, ",")))
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				got := errorAnswers(t, p, tc.answers)
				if !maps.Equal(got, tc.answers) {
					t.Fatalf("answers per request id %v; want %v", got, tc.answers)
				}
				ds := p.c.Decisions()
				if len(ds) != tc.kept {
					t.Fatalf("%d decisions kept; want %d", len(ds), tc.kept)
				}
				if slices.ContainsFunc(ds, func(d engine.NativeDecision) bool { return pairOf(d.ID) == tc.notKept }) {
					t.Fatalf("the answered request %s is kept again, to be answered twice", tc.notKept)
				}
			})
		}
	}
}
