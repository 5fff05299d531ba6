package pi

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/protocol"
)

// mapRecording decodes and maps every stdout line of a recording.
func mapRecording(t testing.TB, b []byte) (events []protocol.Event, natives []*native) {
	t.Helper()
	m := newMapper("exec-1")
	lr := engine.NewLineReader(bytes.NewReader(b), 0)
	for {
		line, err := lr.Next()
		if err != nil {
			return events, natives
		}
		n, err := decodeLine(line)
		if err != nil {
			t.Fatalf("decode %q: %v", line, err)
		}
		natives = append(natives, n)
		if n.Type != "response" {
			events = append(events, m.mapNative(n)...)
		}
	}
}

// TestRecordingsDecode decodes every line of every recording: each is a
// known native record, the sequence is contiguous from 1, and nothing
// becomes unavailable.
func TestRecordingsDecode(t *testing.T) {
	for name, b := range recordings(t, ".stdout.jsonl") {
		t.Run(name, func(t *testing.T) {
			events, natives := mapRecording(t, b)
			settles := 0
			for _, n := range natives {
				if _, ok := nativeEvents[n.Type]; !ok && n.Type != "response" {
					t.Errorf("unknown native type %q in a pinned recording", n.Type)
				}
				if n.Type == "agent_settled" {
					settles++
				}
			}
			runSettled := 0
			for i, e := range events {
				if e.Seq != uint64(i+1) || e.Execution != "exec-1" || e.Record != "event" {
					t.Fatalf("event %d: seq %d exec %q", i, e.Seq, e.Execution)
				}
				if e.Kind == protocol.EventUnavailable {
					t.Errorf("event %d unavailable: %+v", i, e)
				}
				if e.Kind == protocol.EventRunSettled {
					runSettled++
				}
				if _, err := json.Marshal(e); err != nil {
					t.Fatalf("event %d does not marshal: %v", i, err)
				}
			}
			if runSettled != settles {
				t.Fatalf("%d run-settled for %d agent_settled", runSettled, settles)
			}
		})
	}
}

// TestToolCallRecordingE1 rebuilds the tool-call recording's visible
// conversation from events alone: deltas appended per block equal the
// authoritative message-end text; tool updates replace; every tool event
// names the assistant message that called it.
func TestToolCallRecordingE1(t *testing.T) {
	events, _ := mapRecording(t, recordings(t, ".stdout.jsonl")["01-tool-call.stdout.jsonl"])
	text := map[string]string{} // message key -> appended text
	roles := map[string]string{}
	var ends []protocol.Event
	var toolUpdates, toolStarts, toolEnds int
	var toolMsg string
	for _, e := range events {
		switch e.Kind {
		case protocol.EventMessageStart:
			roles[e.Message] = e.Role
		case protocol.EventTextDelta:
			if e.UpdateMode != protocol.UpdateAppend || e.Block == nil || e.Fragment == nil {
				t.Fatalf("text delta without address: %+v", e)
			}
			text[e.Message] += e.Text
		case protocol.EventMessageEnd:
			if e.UpdateMode != protocol.UpdateReplace || e.Part == nil || !e.LastPart {
				t.Fatalf("message-end not a replacing last part: %+v", e)
			}
			ends = append(ends, e)
		case protocol.EventToolStart:
			toolStarts++
			toolMsg = e.Message
			if e.Tool.CallID != "call_1" || e.Tool.Name != "bash" || !strings.Contains(string(e.Tool.Args), "setsid") {
				t.Fatalf("tool-start %+v", e.Tool)
			}
		case protocol.EventToolUpdate:
			toolUpdates++
			if e.UpdateMode != protocol.UpdateReplace || e.Message != toolMsg {
				t.Fatalf("tool-update must replace and name its message: %+v", e)
			}
		case protocol.EventToolEnd:
			toolEnds++
			if e.UpdateMode != protocol.UpdateReplace || !strings.Contains(string(e.Tool.Result), `started\n`) {
				t.Fatalf("tool-end %+v", e)
			}
		}
	}
	if toolStarts != 1 || toolUpdates != 2 || toolEnds != 1 {
		t.Fatalf("tool events start=%d update=%d end=%d", toolStarts, toolUpdates, toolEnds)
	}
	wantRoles := []string{"user", "assistant", "toolResult", "assistant", "user", "assistant"}
	if len(ends) != len(wantRoles) {
		t.Fatalf("got %d message-end, want %d", len(ends), len(wantRoles))
	}
	for i, e := range ends {
		if e.Role != wantRoles[i] || roles[e.Message] != e.Role {
			t.Fatalf("message-end %d role %q (start said %q), want %q", i, e.Role, roles[e.Message], wantRoles[i])
		}
		if e.Role != "assistant" {
			continue
		}
		var final string
		for _, b := range e.Content {
			if b.Type == "text" {
				final += b.Text
			}
		}
		if text[e.Message] != final {
			t.Fatalf("message %s: deltas %q, final %q", e.Message, text[e.Message], final)
		}
	}
	if ends[1].StopReason != "toolUse" || ends[1].Content[1].Type != "toolCall" || ends[1].Message != toolMsg {
		t.Fatalf("assistant tool message %+v (tool events name %q)", ends[1], toolMsg)
	}
	if ends[2].Tool == nil || ends[2].Tool.CallID != "call_1" {
		t.Fatalf("toolResult message-end without its call: %+v", ends[2])
	}
	if ends[5].Content[0].Text != "Plain answer to: /settings PLAIN" {
		t.Fatalf("slash text reached the model as text: %+v", ends[5].Content)
	}
}

// TestUnknownNativeE5: unknown events and subtypes become unavailable
// events without payload; known-but-unsupported ones too; nothing is
// dropped and the sequence has no gap.
func TestUnknownNativeE5(t *testing.T) {
	tests := []struct {
		name, line, reason, native string
	}{
		{"unknown type", `{"type":"frobnicated","secret":"payload"}`, protocol.ReasonUnknownNative, "frobnicated"},
		{"unknown delta", `{"type":"message_update","assistantMessageEvent":{"type":"image_delta","contentIndex":0,"delta":"payload"}}`, protocol.ReasonUnknownNative, "message_update/image_delta"},
		{"extension error", `{"type":"extension_error","error":"payload"}`, protocol.ReasonUnsupportedNative, "extension_error"},
		{"long type", `{"type":"` + strings.Repeat("x", 200) + `"}`, protocol.ReasonUnknownNative, strings.Repeat("x", maxNativeLabel)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := newMapper("e")
			n, err := decodeLine([]byte(tc.line))
			if err != nil {
				t.Fatal(err)
			}
			evs := m.mapNative(n)
			if len(evs) != 1 {
				t.Fatalf("got %d events", len(evs))
			}
			e := evs[0]
			if e.Kind != protocol.EventUnavailable || e.Reason != tc.reason || e.Native != tc.native || e.Seq != 1 {
				t.Fatalf("got %+v", e)
			}
			b, _ := json.Marshal(e)
			if bytes.Contains(b, []byte("payload")) {
				t.Fatalf("unavailable event carries the payload: %s", b)
			}
		})
	}
}

func TestDecodeLineRejects(t *testing.T) {
	for _, line := range []string{``, `not json`, `[]`, `{}`, `{"type":""}`, `{"type":3}`, `"x"`} {
		if _, err := decodeLine([]byte(line)); err == nil {
			t.Errorf("decodeLine(%q) accepted", line)
		}
	}
}

// FuzzDecode feeds arbitrary lines to the decoder and the mapper: they
// never panic, every event is numbered and marshals, and an undecodable
// line is an error (the Conn makes it an unavailable event).
func FuzzDecode(f *testing.F) {
	for _, b := range recordings(f, ".stdout.jsonl") {
		for _, line := range bytes.Split(b, []byte("\n")) {
			f.Add(line)
		}
	}
	f.Add([]byte(`{"type":"message_end","message":{"role":"user","content":"plain"}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		m := newMapper("f")
		n, err := decodeLine(line)
		if err != nil {
			return
		}
		for i := 0; i < 2; i++ {
			for _, e := range m.mapNative(n) {
				if e.Seq == 0 || e.Execution != "f" {
					t.Fatalf("unnumbered event %+v", e)
				}
				if _, err := json.Marshal(e); err != nil {
					t.Fatalf("event does not marshal: %v", err)
				}
			}
		}
		tr := newTracker()
		tr.observe(n)
		tr.respond(n)
	})
}

// TestRedactedThinking: redacted reasoning ends as an unavailable block
// with empty text, as history shows it, so the live copy of a message and
// the same message re-read from the session file agree; its signature is
// never carried.
func TestRedactedThinking(t *testing.T) {
	line := `{"type":"message_end","message":{"role":"assistant","stopReason":"stop","content":[` +
		`{"type":"thinking","thinking":"","thinkingSignature":"c2VjcmV0","redacted":true},` +
		`{"type":"thinking","thinking":"visible"},{"type":"text","text":"answer"}]}}`
	events, _ := mapRecording(t, []byte(line+"\n"))
	if len(events) != 1 {
		t.Fatalf("%d events, want 1", len(events))
	}
	want := []protocol.Block{{Type: "unavailable"}, {Type: "thinking", Text: "visible"}, {Type: "text", Text: "answer"}}
	gb, _ := json.Marshal(events[0].Content)
	wb, _ := json.Marshal(want)
	if !bytes.Equal(gb, wb) || strings.Contains(string(gb), "c2VjcmV0") {
		t.Fatalf("blocks %s, want %s", gb, wb)
	}
}
