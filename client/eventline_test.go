package client

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/protocol"
)

// fullEvent is the full path for an event line: Validate, then
// encoding/json.
func fullEvent(line []byte) (*protocol.Event, bool) {
	if protocol.Validate(line) != nil {
		return nil, false
	}
	ev := new(protocol.Event)
	if json.Unmarshal(line, ev) != nil {
		return nil, false
	}
	return ev, true
}

// eventLines are lines the controller writes (protocol.Line of real
// events) and hand-made ones at the edges of what the one-pass decoder
// takes.
func eventLines(t testing.TB) []string {
	t.Helper()
	var lines []string
	for _, ev := range []protocol.Event{
		{Kind: protocol.EventTextDelta, Execution: "x-1", Seq: 7, Message: "m-1", Role: "assistant",
			Block: protocol.Ordinal(0), BlockType: "text", Fragment: protocol.Ordinal(12),
			UpdateMode: protocol.UpdateAppend, Text: "héllo \"there\"\n\t\\ <&> \u2028 \U0001F600"},
		{Kind: protocol.EventRunSettled, Execution: "x-1", Seq: 9007199254740991},
		{Kind: protocol.EventMessageEnd, Execution: "x-1", Seq: 3, Message: "m-2", Part: protocol.Ordinal(0), LastPart: true,
			Content: []protocol.Block{{Type: "text", Text: "done"}}, StopReason: "stop"},
		{Kind: protocol.EventUnavailable, Execution: "x-2", Seq: 1, Reason: protocol.ReasonUnknownNative, Native: "odd", Truncated: true},
		{Kind: protocol.EventToolStart, Execution: "x-2", Seq: 2, Tool: &protocol.Tool{CallID: "c", Name: "bash", Args: json.RawMessage(`{"a":1}`)}},
		{Kind: protocol.EventThinkingDelta, Execution: "x-2", Seq: 4, Block: protocol.Ordinal(1), Fragment: protocol.Ordinal(0), LastFragment: true, Text: "\x00\x1f\x7f"},
	} {
		ev.Record = protocol.RecordEvent
		line, err := protocol.Line(ev)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, strings.TrimSuffix(string(line), "\n"))
	}
	return append(lines,
		`{"record":"event","kind":"text-delta","seq":1,"text":"a\u00e9\u0041\/b"}`,
		`{"record":"event","seq":1,"seq":2}`,
		`{"record":"event","seq":1,"Seq":2}`,
		`{"record":"event","SEQ":2}`,
		`{"record":"event","se\u0071":2}`,
		`{"record":"event","seq":01}`,
		`{"record":"event","seq":0}`,
		`{"record":"event","seq":-1}`,
		`{"record":"event","seq":1.0}`,
		`{"record":"event","seq":1e3}`,
		`{"record":"event","seq":9007199254740992}`,
		`{"record":"event","seq":12345678901234567890}`,
		`{"record":"event","block":-1}`,
		`{"record":"event","text":null}`,
		`{"record":"event","text":"\ud83d\ude00"}`,
		`{"record":"event","text":"\ud83d"}`,
		`{"record":"event","text":"\ude00x"}`,
		`{"record":"event","text":"\x"}`,
		`{"record":"event","text":"\u12"}`,
		`{"record":"event","text":"`+"\x01"+`"}`,
		`{"record":"event","text":"`+"\xff"+`"}`,
		`{"record":"event","text":"a\`+"\xc3\xa9"+`"}`,
		`{"record":"event","text":"a"} `,
		`{"record":"event","text":"a"}}`,
		`{"record":"event", "text":"a"}`,
		`{"record":"event","text": "a"}`,
		`{"record":"event","text":1}`,
		`{"record":"event","seq":"1"}`,
		`{"record":"event","truncated":true,"lastPart":false}`,
		`{"record":"event","truncated":tru}`,
		`{"record":"event","truncated":null}`,
		`{"record":"event","record":"event"}`,
		`{"record":"event","kind":"text-delta"`,
		`{"record":"event",}`,
		`{"record":"event","ui":{}}`,
		`{"record":"event","-":1}`,
		`{"record":"event","content":[]}`,
		`{"record":"event","unknown":"x"}`,
	)
}

// TestEventLineMatchesFullDecode: whatever line the one-pass decoder
// takes, the full path takes too and decodes to the same event.
func TestEventLineMatchesFullDecode(t *testing.T) {
	fast := 0
	for i, line := range eventLines(t) {
		t.Run(line, func(t *testing.T) {
			took := checkEventLine(t, []byte(line))
			if i == 0 && !took {
				t.Fatal("the one-pass decoder did not take a text delta as the controller writes it")
			}
			if took {
				fast++
			}
		})
	}
	if fast < 6 {
		t.Fatalf("the one-pass decoder took only %d lines: it is not being exercised", fast)
	}
}

// checkEventLine compares the two paths on line and says whether the
// one-pass decoder took it.
func checkEventLine(t testing.TB, line []byte) bool {
	t.Helper()
	var d lineDecoder
	got, ok := d.event(line)
	if !ok {
		return false
	}
	want, wok := fullEvent(line)
	if !wok {
		t.Fatalf("the one-pass decoder took %q, which the full path refuses", line)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q:\n one pass %+v\n full     %+v", line, got, want)
	}
	// And through decode, as the read loop sees it.
	u, err := d.decode(line)
	if err != nil || u.Record != protocol.RecordEvent || !reflect.DeepEqual(u.Event, want) || string(u.Raw) != string(line) {
		t.Fatalf("decode(%q) = %+v, %v", line, u, err)
	}
	return true
}

// TestEventLineSharesRepeats: a run of deltas shares its execution and
// message strings, and a new one is taken, not the old one kept.
func TestEventLineSharesRepeats(t *testing.T) {
	var d lineDecoder
	a, _ := d.event([]byte(`{"record":"event","execution":"x-1","seq":1,"message":"m"}`))
	b, _ := d.event([]byte(`{"record":"event","execution":"x-2","seq":2,"message":"m"}`))
	if a == nil || b == nil || a.Execution != "x-1" || b.Execution != "x-2" || b.Message != "m" {
		t.Fatalf("got %+v and %+v", a, b)
	}
}

// FuzzEventLine: on any line the one-pass decoder never says more than
// the full path does.
func FuzzEventLine(f *testing.F) {
	for _, line := range eventLines(f) {
		f.Add([]byte(line))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		checkEventLine(t, line)
	})
}
