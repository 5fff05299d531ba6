package client

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/protocol"
)

// flatEdgeLines are hostile and edge lines for the one-pass decoder of
// binding and queue records (review of lineDecoder.flat).
func flatEdgeLines() []string {
	long := strings.Repeat("é\\u00e9x", 40000)
	return []string{
		// escapes
		`{"record":"binding","state":"\u0000"}`,
		`{"record":"binding","state":"a\/b"}`,
		`{"record":"binding","state":"\u00E9\u00e9\b\f\n\r\t\"\\"}`,
		`{"record":"binding","state":"\u2028\u2029\uFFFF\uFFFE"}`,
		`{"record":"binding","state":"\uDBFF\uDFFF"}`,
		`{"record":"binding","state":"\udc00"}`,
		`{"record":"binding","state":"\u12"}`,
		`{"record":"binding","state":"\u12G4"}`,
		`{"record":"binding","state":"\`,
		`{"record":"binding","state":"\"`,
		`{"record":"binding","state":"` + "\\\xc3\xa9" + `"}`,
		`{"record":"binding","state":"` + "\xed\xa0\x80" + `"}`,
		`{"record":"binding","state":"` + "\xef\xbf\xbd" + `"}`,
		`{"record":"binding","state":"` + "\xc3" + `"}`,
		`{"record":"binding","state":"` + "\x7f" + `"}`,
		// keys
		`{"record":"binding","ſtate":"a"}`,
		`{"record":"binding","STATE":"a"}`,
		`{"record":"binding","state ":"a"}`,
		`{"record":"binding","":"a"}`,
		`{"record":"binding","state":"a","State":"b"}`,
		`{"record":"binding","State":"b","state":"a"}`,
		`{"record":"binding","engineend":null}`,
		`{"record":"binding","engineEnd":{}}`,
		`{"record":"binding","restart":{"at":"x"}}`,
		`{"record":"binding","Record":"queue"}`,
		`{"record":"binding","record":"queue"}`,
		`{"record":"queue","revision":1,"items":[{"ID":"a"}]}`,
		`{"record":"queue","revision":1,"items":[{"id":"a","Id":"b"}]}`,
		`{"record":"queue","revision":1,"items":[{"record":"a"}]}`,
		`{"record":"queue","request":"r","items":[{"request":"q","revision":2}],"revision":1}`,
		`{"record":"queue","items":[{"revision":1}],"revision":2}`,
		// numbers
		`{"record":"binding","generation":9007199254740991}`,
		`{"record":"binding","generation":9007199254740992}`,
		`{"record":"binding","generation":99999999999999999}`,
		`{"record":"binding","generation":00}`,
		`{"record":"binding","generation":0}`,
		`{"record":"binding","generation":-0}`,
		`{"record":"binding","generation":1e3}`,
		`{"record":"binding","generation":1E3}`,
		`{"record":"binding","generation":1.0}`,
		`{"record":"binding","generation":1x}`,
		`{"record":"binding","generation":`,
		`{"record":"binding","generation":}`,
		`{"record":"binding","lateEvents":9007199254740991}`,
		`{"record":"binding","pendingApprovals":9007199254740991}`,
		`{"record":"queue","revision":9007199254740991,"items":[{"afterSeq":9007199254740991,"edits":9007199254740991,"generation":9007199254740991,"revision":9007199254740991}]}`,
		// booleans
		`{"record":"binding","reconcile":true}`,
		`{"record":"binding","reconcile":false}`,
		`{"record":"binding","reconcile":truee}`,
		`{"record":"binding","reconcile":`,
		`{"record":"binding","reconcile":null}`,
		`{"record":"binding","reconcile":fals}`,
		// structure
		`{"record":"binding",}`,
		`{"record":"binding","state":"a"}}`,
		`{"record":"binding","state":"a"}` + "\n",
		`{"record":"binding","state":"a"}` + "\r",
		`{"record":"binding","state":"a"}` + "\x00",
		`{"record":"binding","state":"a"`,
		`{"record":"binding","state":"a",`,
		`{"record":"binding","state":"a"]`,
		`{"record":"binding","state"`,
		`{"record":"binding","state":`,
		`{"record":"binding","state"  :"a"}`,
		`{"record":"binding","state":["a"]}`,
		`{"record":"queue","items":[]}`,
		`{"record":"queue","items":[{}]}`,
		`{"record":"queue","items":[{},{}]}`,
		`{"record":"queue","items":[{}`,
		`{"record":"queue","items":[{},`,
		`{"record":"queue","items":[{}]`,
		`{"record":"queue","items":[`,
		`{"record":"queue","items":[]`,
		`{"record":"queue","items":[}`,
		`{"record":"queue","items":[[]]}`,
		`{"record":"queue","items":[{"id":["a"]}]}`,
		`{"record":"queue","items":[{"id":"a"}{"id":"b"}]}`,
		`{"record":"queue","items":[{"id":"a"}],}`,
		`{"record":"queue","items":[{"id":"a",}]}`,
		`{"record":"queue","items":[{,}]}`,
		`{"record":"queue","items":[{"id":"a"} ]}`,
		`{"record":"queue","items":[ {"id":"a"}]}`,
		`{"record":"queue","items":null}`,
		`{"record":"queue","items":[null]}`,
		`{"record":"queue","items":[{"id":"a"}],"items":[]}`,
		`{"record":"queue","paused":true,"paused":false}`,
		`{"record":"queue","items":[{"id":"` + long + `"}]}`,
		`{"record":"binding","state":"` + long + `"}`,
		`{"record":"binding","state":"` + strings.Repeat("a", 1024) + `","leaf":"` + strings.Repeat("b", 1025) + `"}`,
	}
}

func TestFlatLineEdges(t *testing.T) {
	taken := 0
	for _, line := range flatEdgeLines() {
		name := line
		if len(name) > 80 {
			name = name[:80]
		}
		t.Run(name, func(t *testing.T) {
			if checkFlatLine(t, []byte(line)) {
				taken++
			}
			if _, err := decodeFull([]byte(line)); err != nil {
				var d lineDecoder
				if _, err := d.decode([]byte(line)); err == nil {
					t.Fatalf("decode took %q, which the full path refuses", line)
				}
			}
		})
	}
	t.Logf("the one-pass decoder took %d of %d", taken, len(flatEdgeLines()))
}

// TestFlatLineEveryPrefix: every truncation of lines the one-pass
// decoder takes neither panics nor disagrees with the full path.
func TestFlatLineEveryPrefix(t *testing.T) {
	for _, line := range append(flatLines(t)[:controllerFlat], flatEdgeLines()[:40]...) {
		for n := 0; n <= len(line); n++ {
			b := []byte(line[:n]) // its own array: a read past n is caught by the race detector, not here
			b = b[:n:n]
			checkFlatLine(t, b)
		}
	}
}

// randString is a string the controller might hold: ASCII, controls,
// HTML bytes, U+2028, non-BMP runes, invalid UTF-8, long runs.
func randString(r *rand.Rand) string {
	if r.IntN(4) == 0 {
		return ""
	}
	parts := []string{"a", "pi-1", "<&>", "\"", "\\", "/", "\x00", "\x01", "\x1f", "\x7f", "\u2028", "\u2029",
		"é", "\U0001F600", "\xff", "\xed\xa0\x80", "\ufffd", "\t\n", strings.Repeat("x", 700)}
	var b strings.Builder
	for range r.IntN(8) {
		b.WriteString(parts[r.IntN(len(parts))])
	}
	return b.String()
}

func randN(r *rand.Rand) uint64 {
	switch r.IntN(4) {
	case 0:
		return 0
	case 1:
		return 1<<53 - 1
	}
	return r.Uint64N(1 << 20)
}

// randInt is randN within int's range (a 32-bit build's too).
func randInt(r *rand.Rand) int {
	return int(min(randN(r), uint64(math.MaxInt)))
}

// TestFlatLineTakesControllerShapes: protocol.Line of every binding and
// queue of the shape the controller builds (no engineEnd or restart,
// items never nil), with random field values, is taken by the one-pass
// decoder and decodes as the full path does.
func TestFlatLineTakesControllerShapes(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var d lineDecoder // one decoder across all: strings share blocks
	type kept struct {
		u    Update
		want Update
	}
	var all []kept
	for i := range 3000 {
		var v any
		if i%2 == 0 {
			v = protocol.Binding{Record: protocol.RecordBinding, Conversation: randString(r), State: randString(r), Admission: randString(r),
				AdmissionReason: randString(r), Execution: randString(r), Generation: int64(randN(r)), Controller: randString(r),
				ControllerConnected: r.IntN(2) == 0, SessionID: randString(r), Leaf: randString(r), Engine: randString(r), Cohort: randString(r),
				Scope: randString(r), EngineState: randString(r), Reconcile: r.IntN(2) == 0, LastStop: randString(r), LateEvents: randN(r),
				PendingApprovals: randInt(r)}
		} else {
			q := protocol.Queue{Record: protocol.RecordQueue, Request: randString(r), Revision: randN(r), Paused: r.IntN(2) == 0,
				PauseReason: randString(r), Items: []protocol.QueueItem{}}
			for range r.IntN(5) {
				q.Items = append(q.Items, protocol.QueueItem{ID: randString(r), Receipt: randString(r), Request: randString(r),
					Revision: randInt(r), State: randString(r), Text: randString(r), Digest: randString(r), Original: randString(r),
					Edits: randInt(r), Actor: randString(r), Connection: randString(r), Generation: int64(randN(r)),
					Execution: randString(r), AfterSeq: randN(r), Reason: randString(r), Evidence: randString(r)})
			}
			v = q
		}
		line, err := protocol.Line(v)
		if err != nil {
			t.Fatal(err)
		}
		line = line[:len(line)-1]
		u, ok := d.flat(line)
		if !ok {
			t.Fatalf("the one-pass decoder did not take %s", line)
		}
		want, err := decodeFull(bytes.Clone(line))
		if err != nil {
			t.Fatalf("full path refused %s: %v", line, err)
		}
		if !reflect.DeepEqual(u.Binding, want.Binding) || !reflect.DeepEqual(u.Queue, want.Queue) {
			t.Fatalf("%s:\n one pass %+v %+v\n full %+v %+v", line, u.Binding, u.Queue, want.Binding, want.Queue)
		}
		// interleave events, which share the string blocks
		ev, _ := protocol.Line(protocol.Event{Record: protocol.RecordEvent, Kind: protocol.EventTextDelta, Execution: "x",
			Seq: uint64(i + 1), Message: "m", Text: fmt.Sprintf("delta %d %s", i, randString(r))})
		if _, err := d.decode(ev[:len(ev)-1]); err != nil {
			t.Fatal(err)
		}
		// and a refused flat line part-decoded
		d.flat([]byte(`{"record":"binding","state":"` + randString(r) + `","state":"x"}`))
		all = append(all, kept{u, want})
	}
	for i, k := range all {
		if !reflect.DeepEqual(k.u.Binding, k.want.Binding) || !reflect.DeepEqual(k.u.Queue, k.want.Queue) {
			t.Fatalf("record %d changed after it was decoded", i)
		}
	}
}

// TestFlatLineIntFields32: the int fields (a binding's pendingApprovals,
// an item's revision and edits) take any safe integer only where int has
// 64 bits. On a 32-bit build (packaging/build.sh makes i386 packages)
// encoding/json refuses a value past math.MaxInt32 (it overflows int),
// so the one-pass decoder must refuse it too, not wrap it (2^32 -> 0).
// Run with GOARCH=386 to see it.
func TestFlatLineIntFields32(t *testing.T) {
	for _, n := range []string{"2147483647", "2147483648", "4294967296", "9007199254740991"} {
		for _, line := range []string{
			`{"record":"binding","pendingApprovals":` + n + `}`,
			`{"record":"queue","revision":1,"items":[{"revision":` + n + `}]}`,
			`{"record":"queue","revision":1,"items":[{"edits":` + n + `}]}`,
		} {
			checkFlatLine(t, []byte(line))
		}
	}
}
