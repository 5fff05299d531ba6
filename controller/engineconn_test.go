package controller

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/engine/claude"
	"github.com/mosaic-agents/mosaic/protocol"
)

// lockedBuffer is the engine's stdin as the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuffer) Close() error { return nil }
func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestClaudeConnDecisions: the controller's view of Claude's permission
// requests. A request is an open dialog projected as a select of exactly
// allow-once and deny; a choice outside them is ErrAnswerShape with
// nothing written; a forgotten or withdrawn request is closed
// (ErrDialogClosed) and never answered; allow-once writes one allow with
// the model's own input.
func TestClaudeConnDecisions(t *testing.T) {
	x, conn, w, stdin := claudeExecution(t)
	ask := func(req string) string {
		t.Helper()
		ch := conn.Changed()
		line := `{"type":"control_request","request_id":"` + req + `","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"touch x"},"tool_use_id":"toolu_` + req + `"}}` + "\n"
		if _, err := io.WriteString(w, line); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ch:
		case <-time.After(time.Minute):
			t.Fatal("the request was not registered")
		}
		ds := conn.Decisions()
		return ds[len(ds)-1].ID
	}

	a := ask("r1")
	if !x.decisionOpen(a) || x.openDecisions() != 1 {
		t.Fatalf("request %s not open (%d open)", a, x.openDecisions())
	}
	ds := conn.Decisions()
	ui := decisionUI(ds[0], true)
	if ui.Method != protocol.FormSelect || !slices.Equal(ui.Options, []string{engine.ChoiceAllowOnce, engine.ChoiceDeny}) || ui.ID != a || !strings.Contains(ui.Title, "Bash") {
		t.Fatalf("projected as %+v", ui)
	}
	for _, choice := range []string{"true", "allow-always", ""} {
		if err := x.answer(a, choice, 5*time.Second); !errors.Is(err, engine.ErrAnswerShape) {
			t.Fatalf("Answer(%q) = %v, want ErrAnswerShape", choice, err)
		}
	}
	if stdin.String() != "" {
		t.Fatalf("a refused answer wrote %q", stdin.String())
	}
	x.forget(a)
	if x.decisionOpen(a) || x.openDecisions() != 0 {
		t.Fatal("a forgotten request stays open")
	}
	if err := x.answer(a, engine.ChoiceAllowOnce, 5*time.Second); !errors.Is(err, engine.ErrDialogClosed) || stdin.String() != "" {
		t.Fatalf("answer to a forgotten request: %v, wrote %q", err, stdin.String())
	}

	b := ask("r2")
	ch := conn.Changed()
	if _, err := io.WriteString(w, `{"type":"control_cancel_request","request_id":"r2"}`+"\n"); err != nil {
		t.Fatal(err)
	}
	<-ch
	if x.decisionOpen(b) {
		t.Fatal("a withdrawn request stays open")
	}
	if err := x.answer(b, engine.ChoiceAllowOnce, 5*time.Second); !errors.Is(err, engine.ErrDialogClosed) || stdin.String() != "" {
		t.Fatalf("answer to a withdrawn request: %v, wrote %q", err, stdin.String())
	}

	c := ask("r3")
	if err := x.answer(c, engine.ChoiceAllowOnce, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := stdin.String(); strings.Count(got, "\n") != 1 || !strings.Contains(got, `"behavior":"allow"`) || !strings.Contains(got, `"touch x"`) || !strings.Contains(got, `"request_id":"r3"`) {
		t.Fatalf("allow-once wrote %q", got)
	}
	if x.decisionOpen(c) {
		t.Fatal("an answered request stays open")
	}
	if _, err := probe(x, "get_state"); !errors.Is(err, errNotPi) {
		t.Fatalf("get_state on Claude: %v", err)
	}
}

// TestClaudeReaskedDecisionClosed: an approval shown for a permission
// request stays bound to that request. The CLI withdraws it, pushes it
// out of the adapter's kept decisions with a burst of requests asked and
// withdrawn, and asks again under the same request and tool use ids with
// another input; an answer to the approval shown (its watcher may have
// missed the burst) is ErrDialogClosed with nothing written, never an
// allow of the input nobody was shown.
func TestClaudeReaskedDecisionClosed(t *testing.T) {
	x, conn, w, stdin := claudeExecution(t)
	ask := func(req, command string) string {
		return `{"type":"control_request","request_id":"` + req + `","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"` + command + `"},"tool_use_id":"toolu_1"}}` + "\n"
	}
	cancel := func(req string) string { return `{"type":"control_cancel_request","request_id":"` + req + `"}` + "\n" }
	ch := conn.Changed()
	io.WriteString(w, ask("r", "ls"))
	<-ch
	shown := conn.Decisions()[0].ID
	burst := cancel("r")
	for i := range 256 {
		burst += ask(fmt.Sprint("f", i), "true") + cancel(fmt.Sprint("f", i))
	}
	io.WriteString(w, burst+ask("r", "rm -rf /"))
	w.Close()
	<-conn.Done()
	ds := conn.Decisions()
	if last := ds[len(ds)-1]; last.State != engine.DecisionPending || !strings.Contains(string(last.Input), "rm -rf") || last.ID == shown {
		t.Fatalf("the request asked again is %+v; want a new pending decision, not %s", last, shown)
	}
	if err := x.answer(shown, engine.ChoiceAllowOnce, 5*time.Second); !errors.Is(err, engine.ErrDialogClosed) || stdin.String() != "" {
		t.Fatalf("allow of the approval shown: %v, wrote %q", err, stdin.String())
	}
}

// claudeExecution is an execution on a Claude adapter (also returned)
// fed by the returned pipe (the CLI's stdout), writing to the returned
// buffer (its stdin), its events drained.
func claudeExecution(t *testing.T) (*execution, *claude.Conn, *io.PipeWriter, *lockedBuffer) {
	t.Helper()
	r, w := io.Pipe()
	t.Cleanup(func() { w.Close() })
	stdin := &lockedBuffer{}
	conn, err := claude.New(r, stdin, "0b7e6f1e-3c1a-4b2a-9d3e-5f6a7b8c9d0e", engine.Options{Execution: "e-1"})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for range conn.Events() {
		}
	}()
	return &execution{id: "e-1", conn: conn}, conn, w, stdin
}
