package client

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/protocol"
)

// flatLines are binding and queue lines as the controller writes them
// (protocol.Line of real records, the first controllerFlat of them) and
// hand-made ones at the edges of what the one-pass decoder takes.
func flatLines(t testing.TB) []string {
	t.Helper()
	item := protocol.QueueItem{ID: "qi-1", Receipt: "rc-1", Request: "p-1", Revision: 3, State: "acknowledged",
		Digest: "d8", Original: "d8", Actor: "local-operator", Connection: "k-1", Generation: 1, Execution: "e-1", AfterSeq: 9007199254740991}
	waiting := item
	waiting.ID, waiting.State, waiting.Text, waiting.Edits, waiting.Reason, waiting.Evidence = "qi-2", "queued", "héllo \"there\"\n\t\\ <&> \u2028 \U0001F600", 2, "r", "ev"
	var lines []string
	for _, v := range []any{
		protocol.Binding{Record: protocol.RecordBinding, Conversation: "pi-1", State: "active", Admission: "open", Execution: "e-1",
			Generation: 1, Controller: "k-1", ControllerConnected: true, SessionID: "s", Leaf: "l", Engine: "pi (test engine)",
			Cohort: "scope", Scope: `mosaic-engine-pi\x2d1.scope`, EngineState: "busy", Reconcile: true, LastStop: "s-1",
			LateEvents: 4, PendingApprovals: 2},
		protocol.Binding{Record: protocol.RecordBinding, Conversation: "pi-1", State: "fenced", Admission: "closed", AdmissionReason: "stopping", EngineState: "none"},
		protocol.Queue{Record: protocol.RecordQueue, Revision: 6, Items: []protocol.QueueItem{item, waiting}},
		protocol.Queue{Record: protocol.RecordQueue, Request: "r-1", Revision: 7, Paused: true, PauseReason: "interrupt", Items: []protocol.QueueItem{}},
		// Taken by the full path: a binding's nested objects, a nil items.
		protocol.Binding{Record: protocol.RecordBinding, Conversation: "pi-1", EngineEnd: &protocol.EngineEnd{Execution: "e-1", Status: "exit status 1"}},
		protocol.Queue{Record: protocol.RecordQueue, Revision: 1},
	} {
		b, err := protocol.Line(v)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, string(bytes.TrimSuffix(b, []byte("\n"))))
	}
	return append(lines,
		`{"record":"binding","state":"a","state":"b"}`,
		`{"record":"binding","state":"a","record":"binding"}`,
		`{"record":"binding", "state":"a"}`,
		`{"record":"binding","state":"a"} `,
		`{"record":"binding","state":"a"}x`,
		`{"record":"binding","State":"a"}`,
		`{"record":"binding","st\u0061te":"a"}`,
		`{"record":"binding","state":"\u0061\ud83d\ude00"}`,
		`{"record":"binding","state":"\ud83d"}`,
		`{"record":"binding","state":null}`,
		`{"record":"binding","state":1}`,
		`{"record":"binding","generation":-1}`,
		`{"record":"binding","generation":01}`,
		`{"record":"binding","generation":1.5}`,
		`{"record":"binding","generation":9007199254740992}`,
		`{"record":"binding","reconcile":"true"}`,
		`{"record":"binding","reconcile":tru}`,
		`{"record":"binding","unknown":"x"}`,
		`{"record":"binding","state":"a`,
		`{"record":"binding","state":"a",}`,
		`{"record":"binding","state":"`+"\xff"+`"}`,
		`{"record":"binding","state":"`+"\x01"+`"}`,
		`{"record":"binding","state":"\q"}`,
		`{"record":"queue","revision":1,"items":[]}`,
		`{"record":"queue","revision":1,"items":[{}]}`,
		`{"record":"queue","revision":1,"items":[{"id":"a"},{"id":"b"}]}`,
		`{"record":"queue","revision":1,"items":[{"id":"a","id":"b"}]}`,
		`{"record":"queue","revision":1,"items":[{"id":"a"},]}`,
		`{"record":"queue","revision":1,"items":[{"id":"a"}`,
		`{"record":"queue","revision":1,"items":{}}`,
		`{"record":"queue","revision":1,"items":[1]}`,
		`{"record":"queue","revision":1,"items":[{"edits":-2}]}`,
		`{"record":"queue","items":[],"items":[]}`,
	)
}

// controllerFlat is how many of flatLines the controller writes in the
// shape the one-pass decoder takes.
const controllerFlat = 4

// TestFlatLineMatchesFullDecode: whatever binding or queue line the
// one-pass decoder takes, the full path (Validate, then encoding/json)
// takes too and decodes to the same record; it takes every line the
// controller writes without a nested object.
func TestFlatLineMatchesFullDecode(t *testing.T) {
	fast := 0
	for i, line := range flatLines(t) {
		t.Run(line, func(t *testing.T) {
			took := checkFlatLine(t, []byte(line))
			if i < controllerFlat && !took {
				t.Fatal("the one-pass decoder did not take a line as the controller writes it")
			}
			if took {
				fast++
			}
		})
	}
	if fast < 7 {
		t.Fatalf("the one-pass decoder took only %d lines: it is not being exercised", fast)
	}
}

// checkFlatLine compares the two paths on line and says whether the
// one-pass decoder took it.
func checkFlatLine(t testing.TB, line []byte) bool {
	t.Helper()
	var d lineDecoder
	got, ok := d.flat(line)
	if !ok {
		return false
	}
	want, err := decodeFull(line)
	if err != nil {
		t.Fatalf("the one-pass decoder took %q, which the full path refuses: %v", line, err)
	}
	if got.Record != want.Record || !reflect.DeepEqual(got.Binding, want.Binding) || !reflect.DeepEqual(got.Queue, want.Queue) ||
		!bytes.Equal(got.Raw, line) {
		t.Fatalf("%q:\n one pass %+v %+v %+v\n full     %+v %+v %+v", line, got.Record, got.Binding, got.Queue, want.Record, want.Binding, want.Queue)
	}
	// And through decode, as the read loop sees it.
	u, err := d.decode(line)
	if err != nil || !reflect.DeepEqual(u.Binding, want.Binding) || !reflect.DeepEqual(u.Queue, want.Queue) {
		t.Fatalf("decode(%q) = %+v, %v", line, u, err)
	}
	return true
}

func FuzzFlatLine(f *testing.F) {
	for _, line := range append(flatLines(f), flatEdgeLines()...) {
		f.Add([]byte(line))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		checkFlatLine(t, line)
	})
}

// TestFlatLineStrictAsFull: a line the full path refuses is refused
// whichever path reads it, through decode as the read loop does.
func TestFlatLineStrictAsFull(t *testing.T) {
	for _, line := range flatLines(t) {
		if _, err := decodeFull([]byte(line)); err == nil {
			continue
		}
		var d lineDecoder
		if _, err := d.decode([]byte(line)); err == nil {
			t.Errorf("decode took %q, which the full path refuses", line)
		}
		if strings.HasPrefix(line, `{"record":"queue"`) || strings.HasPrefix(line, `{"record":"binding"`) {
			continue
		}
		t.Errorf("%q: not a binding or queue line", line)
	}
}
