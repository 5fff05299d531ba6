package claude

import (
	"context"
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
	if ds := p.c.Decisions(); len(ds) != 1 || ds[0].ID != "1d0f1f8b-aaaa-4bbb-8ccc-dddddddddddd/toolu_fake_009" {
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
