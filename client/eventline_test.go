package client

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
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

// controllerLines is how many of eventLines come first from
// protocol.Line.
const controllerLines = 6

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
		{Kind: protocol.EventTextDelta, Execution: "x-1", Seq: 8, Message: "m-1", Role: "assistant",
			Block: protocol.Ordinal(0), BlockType: "text", Fragment: protocol.Ordinal(13),
			UpdateMode: protocol.UpdateAppend, Texts: []string{"a", "", "héllo \"there\"\n\t\\ <&> \u2028 \U0001F600", "\x00"}},
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
		`{"record":"event","block":2147483648,"fragment":4294967296,"part":2147483647}`, // past a 32-bit int: refused there
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
		`{"record":"event","kind":"message-end","content":[{"type":"text","text":"a\nb"},{"type":"thinking","text":"c","truncated":true}],"stopReason":"stop"}`,
		`{"record":"event","content":[{"type":"image","mimeType":"image/png"},{"type":"toolCall","toolCallId":"c1","toolName":"bash"}]}`,
		`{"record":"event","content":[{"text":"a","type":"text"}]}`,
		`{"record":"event","content":[{}]}`,
		`{"record":"event","content":[{},{}]}`,
		`{"record":"event","content":[{"type":"text","type":"x"}]}`,
		`{"record":"event","content":[{"type":"text"},]}`,
		`{"record":"event","content":[,]}`,
		`{"record":"event","content":[{"type":"text"}`,
		`{"record":"event","content":[{"type":"text"}]]}`,
		`{"record":"event","content":[{"type":"text"}}]}`,
		`{"record":"event","content":[{"type":"toolCall","args":{"a":1}}]}`,
		`{"record":"event","content":[{"TYPE":"text"}]}`,
		`{"record":"event","content":[{"type":"text","unknown":"x"}]}`,
		`{"record":"event","content":[{"truncated":"yes"}]}`,
		`{"record":"event","content":[{"text":1}]}`,
		`{"record":"event","content":[1]}`,
		`{"record":"event","content":{}}`,
		`{"record":"event","content":null}`,
		`{"record":"event","content":[null]}`,
		`{"record":"event","content":[],"content":[]}`,
		`{"record":"event","content":[{"text":"\ud83d\ude00"}]}`,
		`{"record":"event","content":[{"text":"`+"\xff"+`"}]}`,
		`{"record":"event","content":[ {"type":"text"}]}`,
		`{"record":"event","texts":[]}`,
		`{"record":"event","texts":["a"]}`,
		`{"record":"event","texts":["a",]}`,
		`{"record":"event","texts":[,"a"]}`,
		`{"record":"event","texts":["a""b"]}`,
		`{"record":"event","texts":["a"]]}`,
		`{"record":"event","texts":["a"}`,
		`{"record":"event","texts":[ "a"]}`,
		`{"record":"event","texts":null}`,
		`{"record":"event","texts":[null]}`,
		`{"record":"event","texts":[1]}`,
		`{"record":"event","texts":"a"}`,
		`{"record":"event","texts":["\ud83d"]}`,
		`{"record":"event","texts":["`+"\xff"+`"]}`,
		`{"record":"event","texts":["a"],"texts":["b"]}`,
		`{"record":"event","text":"a","texts":["b"]}`,
		`{"record":"event","texts":["b"],"text":"a"}`,
		`{"record":"event","Texts":["b"]}`,
	)
}

// TestEventLineMatchesFullDecode: whatever line the one-pass decoder
// takes, the full path takes too and decodes to the same event.
func TestEventLineMatchesFullDecode(t *testing.T) {
	fast := 0
	for i, line := range eventLines(t) {
		t.Run(line, func(t *testing.T) {
			took := checkEventLine(t, []byte(line))
			if i < controllerLines && !strings.Contains(line, `"tool":`) && !took {
				t.Fatal("the one-pass decoder did not take a line as the controller writes it")
			}
			if took {
				fast++
			}
		})
	}
	if fast < 12 {
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

// TestWireKeysMatchLookup: the keys the decoder looks for in wire order
// are exactly those its lookup takes, in the order encoding/json writes
// protocol.Event's and protocol.Block's fields, so the two ways of
// reading a key never differ.
func TestWireKeysMatchLookup(t *testing.T) {
	for _, tc := range []struct {
		name   string
		typ    reflect.Type
		keys   []wireKey
		lookup func([]byte) (uint32, byte)
	}{
		{"event", reflect.TypeFor[protocol.Event](), eventKeys[:], eventField},
		{"block", reflect.TypeFor[protocol.Block](), blockKeys[:], blockField},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var taken []wireKey
			for f := range tc.typ.Fields() {
				name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
				if bit, kind := tc.lookup([]byte(name)); bit != 0 {
					taken = append(taken, wk(`"`+name+`":`, bit, kind))
				}
			}
			for _, k := range tc.keys {
				if len(k.key) > 16 {
					t.Errorf("%s is longer than hasKey's two words", k.key)
				}
			}
			if !reflect.DeepEqual(taken, tc.keys) {
				t.Fatalf("the lookup takes, in field order:\n %v\nthe wire-order table holds:\n %v", taken, tc.keys)
			}
		})
	}
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

// TestSpecialIn: the eight-byte test finds a special byte wherever it
// sits among plain ones, and finds none among plain ones alone.
func TestSpecialIn(t *testing.T) {
	plain := []byte("abcdefgh")
	if specialIn(binary.LittleEndian.Uint64(plain)) != 0 {
		t.Fatalf("%q holds no special byte", plain)
	}
	for c := range 256 {
		for at := range 8 {
			w := []byte(" ~ZAz09!")
			w[at] = byte(c)
			if got := specialIn(binary.LittleEndian.Uint64(w)) != 0; got != special[c] {
				t.Fatalf("byte %#x at %d: found %v, special says %v", c, at, got, special[c])
			}
		}
	}
}

// TestDecodedStringsStay: the strings of an event, taken from blocks the
// decoder shares between events, stay as they were decoded however many
// events follow, and so do the lines they were decoded from.
func TestDecodedStringsStay(t *testing.T) {
	var d lineDecoder
	type kept struct {
		ev         *protocol.Event
		raw        []byte
		text, line string
	}
	var all []kept
	for i := range 5000 {
		text := fmt.Sprintf("delta %d %s", i, strings.Repeat("x", i%300))
		line, err := protocol.Line(protocol.Event{Record: protocol.RecordEvent, Kind: protocol.EventTextDelta,
			Execution: fmt.Sprintf("x-%d", i/100), Seq: uint64(i + 1), Message: fmt.Sprintf("m-%d", i/10), Text: text})
		if err != nil {
			t.Fatal(err)
		}
		line = line[:len(line)-1]
		u, err := d.decode(line)
		if err != nil || u.Event == nil {
			t.Fatalf("decode %s: %v", line, err)
		}
		all = append(all, kept{u.Event, u.Raw, text, string(line)})
	}
	for i, k := range all {
		if k.ev.Text != k.text || k.ev.Execution != fmt.Sprintf("x-%d", i/100) || k.ev.Message != fmt.Sprintf("m-%d", i/10) {
			t.Fatalf("event %d changed after it was decoded: %+v, want text %q", i, k.ev, k.text)
		}
		if string(k.raw) != k.line {
			t.Fatalf("event %d's line changed after it was decoded: %s", i, k.raw)
		}
	}
}

// TestRepeatsAreReadAsStrictly: a value a run repeats is shared only
// where the line spells it exactly; a line that differs from it, even
// by an escape or only past its end, is read (and refused) as any other.
func TestRepeatsAreReadAsStrictly(t *testing.T) {
	for _, tc := range []struct{ first, then string }{
		{`{"record":"event","execution":"x-1"}`, `{"record":"event","execution":"x-1"}`},
		{`{"record":"event","execution":"x-1"}`, `{"record":"event","execution":"x-12"}`},
		{`{"record":"event","execution":"x-12"}`, `{"record":"event","execution":"x-1"}`},
		{`{"record":"event","execution":"x-1"}`, `{"record":"event","execution":"x-1`},
		{`{"record":"event","execution":"a\"b"}`, `{"record":"event","execution":"a"b"}`},
		{`{"record":"event","execution":"a\\b"}`, `{"record":"event","execution":"a\b"}`},
		{`{"record":"event","execution":"a\u0001b"}`, `{"record":"event","execution":"a` + "\x01" + `b"}`},
		{`{"record":"event","execution":"a\"b"}`, `{"record":"event","execution":"a\"b"}`},
		{`{"record":"event","message":"é"}`, `{"record":"event","message":"é"}`},
		{`{"record":"event","message":""}`, `{"record":"event","message":""}`},
		{`{"record":"event","kind":"text-delta"}`, `{"record":"event","kind":"text-delta"}`},
		{`{"record":"event","kind":"text-delta"}`, `{"record":"event","kind":"text-delta-2"}`},
		{`{"record":"event","role":"assistant"}`, `{"record":"event","role":"assistant","role":"user"}`},
	} {
		t.Run(tc.then, func(t *testing.T) {
			var d lineDecoder
			if _, ok := d.event([]byte(tc.first)); !ok {
				t.Fatalf("the one-pass decoder did not take %s", tc.first)
			}
			got, ok := d.event([]byte(tc.then))
			want, wok := fullEvent([]byte(tc.then))
			switch {
			case ok && !wok:
				t.Fatalf("after %s the one-pass decoder took %s, which the full path refuses", tc.first, tc.then)
			case ok && !reflect.DeepEqual(got, want):
				t.Fatalf("after %s:\n one pass %+v\n full     %+v", tc.first, got, want)
			}
		})
	}
}
