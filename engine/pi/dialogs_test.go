package pi

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/protocol"
)

// TestAnswerExactChoice: a dialog request becomes a native-ui event with
// the request verbatim; an answer that is not exactly a native choice
// writes nothing (pinned Pi would hand it to the extension as given); the
// exact choice goes out once as one extension_ui_response with the native
// id and the native shape; a second answer to the same id writes nothing.
func TestAnswerExactChoice(t *testing.T) {
	p := startPeer(t, engine.Options{})
	p.emit(`{"type":"extension_ui_request","id":"d-sel","method":"select","title":"T\u202e<b>","options":["Allow <i>once</i>","multi\nline"]}`,
		`{"type":"extension_ui_request","id":"d-cf","method":"confirm","title":"C","message":"m","timeout":1500}`,
		`{"type":"extension_ui_request","id":"d-in","method":"input","title":"I","placeholder":"p"}`)
	p.sync()
	for _, tc := range []struct{ id, choice string }{
		{"d-sel", "Allow"}, {"d-sel", "Allow <i>once</i> "}, {"d-sel", "true"},
		{"d-cf", "yes"}, {"d-cf", "Allow <i>once</i>"}, {"d-in", "typed"},
	} {
		if err := p.conn.Answer(tc.id, tc.choice); !errors.Is(err, engine.ErrAnswerShape) {
			t.Errorf("answer %s %q: %v, want ErrAnswerShape", tc.id, tc.choice, err)
		}
	}
	if err := p.conn.Answer("d-sel", "multi\nline"); err != nil {
		t.Fatal(err)
	}
	if got := p.next("extension_ui_response"); got["id"] != "d-sel" || got["value"] != "multi\nline" || len(got) != 3 {
		t.Fatalf("response %v", got)
	}
	if err := p.conn.Answer("d-cf", "false"); err != nil {
		t.Fatal(err)
	}
	if got := p.next("extension_ui_response"); got["id"] != "d-cf" || got["confirmed"] != false || len(got) != 3 {
		t.Fatalf("response %v", got)
	}
	if err := p.conn.Answer("d-sel", "multi\nline"); !errors.Is(err, engine.ErrDialogClosed) {
		t.Fatalf("second answer: %v, want ErrDialogClosed", err)
	}
	if n := p.conn.OpenDialogs(); n != 1 {
		t.Fatalf("%d dialogs open, want the input only", n)
	}
	events := p.drain()
	if len(events) != 3 || events[0].Kind != protocol.EventNativeUI || events[0].UI == nil || events[0].UI.Title != "T\u202e<b>" ||
		len(events[0].UI.Options) != 2 || events[1].UI.TimeoutMS != 1500 || events[2].UI.Message != "p" {
		t.Fatalf("events %+v", events)
	}
	if got := fmt.Sprint(p.stdinTypes()); got != "[get_state extension_ui_response extension_ui_response]" {
		t.Fatalf("the engine read %s", got)
	}
}

// TestInterruptCancelsDialogsAfterAbort: an interrupt cancels every open
// dialog right after it writes abort, before the abort's answer (pinned
// Pi's abort waits for a dialog whose extension took no signal), and the
// turn proof names them.
func TestInterruptCancelsDialogsAfterAbort(t *testing.T) {
	p := startPeer(t, engine.Options{})
	p.emit(`{"type":"agent_start"}`, `{"type":"extension_ui_request","id":"d-ed","method":"editor","title":"E"}`)
	p.sync()
	done := make(chan engine.TurnProof, 1)
	go func() { proof, _ := p.conn.Interrupt(context.Background(), "s-1"); done <- proof }()
	p.respond(p.next("clear_queue"), map[string]any{"steering": []string{}, "followUp": []string{}})
	abort := p.next("abort")
	if got := p.next("extension_ui_response"); got["id"] != "d-ed" || got["cancelled"] != true {
		t.Fatalf("after abort the engine got %v, want the cancel of d-ed", got)
	}
	p.emit(`{"type":"agent_end","messages":[],"willRetry":false}`, `{"type":"agent_settled"}`)
	p.respond(abort, nil)
	select {
	case proof := <-done:
		if len(proof.CancelledDialogs) != 1 || proof.CancelledDialogs[0] != "d-ed" {
			t.Fatalf("proof %+v", proof)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("interrupt did not return")
	}
}

// TestRepeatedDialogIDKeepsTheFirst: a dialog request under the id of one
// still open (an extension or a tool writing Pi's stdout) never replaces
// it: the repeat is an unavailable duplicate-id event, the first dialog
// keeps its choices, and its answer goes out for the first request.
func TestRepeatedDialogIDKeepsTheFirst(t *testing.T) {
	for _, tc := range []struct{ name, second, answer string }{
		{"select over select", `{"type":"extension_ui_request","id":"d-1","method":"select","title":"Run ls?","options":["Yes","No"]}`, "Allow"},
		{"confirm over select", `{"type":"extension_ui_request","id":"d-1","method":"confirm","title":"Run ls?"}`, "Allow"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startPeer(t, engine.Options{})
			p.emit(`{"type":"extension_ui_request","id":"d-1","method":"select","title":"Run rm -rf /?","options":["Allow","Block"]}`, tc.second)
			p.sync()
			events := p.drain()
			if len(events) != 2 || events[0].Kind != protocol.EventNativeUI || events[0].UI.Title != "Run rm -rf /?" {
				t.Fatalf("events %+v, want the first dialog then the refused repeat", events)
			}
			if e := events[1]; e.Kind != protocol.EventUnavailable || e.Reason != protocol.ReasonDuplicateID || e.UI != nil {
				t.Fatalf("repeat %+v, want unavailable %s", e, protocol.ReasonDuplicateID)
			}
			if n := p.conn.OpenDialogs(); n != 1 {
				t.Fatalf("%d dialogs open, want 1", n)
			}
			if err := p.conn.Answer("d-1", tc.answer); err != nil {
				t.Fatalf("answer to the first dialog: %v", err)
			}
			if got := p.next("extension_ui_response"); got["id"] != "d-1" || got["value"] != tc.answer {
				t.Fatalf("response %v", got)
			}
		})
	}
}
