package audit

import (
	"bytes"
	"encoding/json"
	"regexp"
	"testing"
)

func TestMessageIDs(t *testing.T) {
	seen := map[string]Event{}
	valid := regexp.MustCompile(`^[0-9a-f]{32}$`)
	for ev, id := range messageIDs {
		if !valid.MatchString(id) {
			t.Errorf("%s: MESSAGE_ID %q is not 128-bit hex", ev, id)
		}
		if other, dup := seen[id]; dup {
			t.Errorf("%s and %s share MESSAGE_ID %s", ev, other, id)
		}
		seen[id] = ev
	}
}

func TestLogFields(t *testing.T) {
	var buf bytes.Buffer
	l := NewWriter("pi-abc", &buf)
	l.Log(Entry{Event: Refusal, Message: "refused", Connection: "k1", Peer: &Peer{UID: 1000, PID: 42}, Refusal: "peer-uid",
		Fields: map[string]string{"DETAIL": "x"}})
	var got map[string]string
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("not one JSON line: %q: %v", buf.String(), err)
	}
	want := map[string]string{
		"MESSAGE": "refused", "MESSAGE_ID": messageIDs[Refusal], "MOSAIC_EVENT": "refusal",
		"MOSAIC_CONVERSATION": "pi-abc", "MOSAIC_CONNECTION": "k1", "MOSAIC_PEER_UID": "1000",
		"MOSAIC_PEER_PID": "42", "MOSAIC_REFUSAL": "peer-uid", "MOSAIC_DETAIL": "x", "PRIORITY": "6",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("fields = %v, want exactly %v", got, want)
	}
}

func TestUnknownPeerOmitted(t *testing.T) {
	var buf bytes.Buffer
	NewWriter("c", &buf).Log(Entry{Event: Start, Message: "m"})
	var got map[string]string
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if _, ok := got["MOSAIC_PEER_UID"]; ok {
		t.Errorf("unknown peer uid written: %v", got)
	}
}
