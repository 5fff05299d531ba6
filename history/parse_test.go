package history

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const recordings = "/work/shared/reference/pi-0.85.1-recordings"

// TestRecordings: every real Pi 0.85.1 session parses, its default leaf is
// the id on its last line (Pi's _buildIndex), and it shows only messages.
func TestRecordings(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(recordings, "*.session.jsonl"))
	if len(files) == 0 {
		t.Skip("no recordings at " + recordings)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			f := newFixture(t)
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			f.write(t, string(b))
			s := f.mustRead(t)
			lines := bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
			var last, first struct{ ID string }
			if err := json.Unmarshal(lines[len(lines)-1], &last); err != nil {
				t.Fatal(err)
			}
			_ = json.Unmarshal(lines[0], &first)
			if s.LeafID() != last.ID || s.SessionID() != first.ID {
				t.Fatalf("leaf %q session %q, want %q %q", s.LeafID(), s.SessionID(), last.ID, first.ID)
			}
			if s.DefaultBranch() != Main || len(s.Branches()) != 1 || s.Incomplete() {
				t.Fatalf("branches %v incomplete %v", s.Branches(), s.Incomplete())
			}
			if got := len(s.EntryIDs()); got != len(lines)-1 {
				t.Fatalf("%d entry ids, want %d", got, len(lines)-1)
			}
			parts := allParts(t, s, "")
			// model_change and thinking_level_change are not shown.
			if len(parts) != len(lines)-3 {
				t.Fatalf("%d parts, want %d", len(parts), len(lines)-3)
			}
			for _, p := range parts {
				if p.Kind != KindMessage || p.Notice != nil || !p.LastPart {
					t.Fatalf("unexpected part %+v", p)
				}
			}
		})
	}
}

func TestParser(t *testing.T) {
	type want struct {
		shown      []string // default branch
		leaf       string
		def        string
		branches   []string
		incomplete bool
	}
	tests := []struct {
		name string
		file func(t *testing.T) string
		want want
	}{
		{"truncated last line", func(t *testing.T) string {
			return hdr + msg(t, "a", "", "user", "hi") + strings.TrimSuffix(msg(t, "b", "a", "assistant", "yo"), "\n")
		}, want{shown: []string{"n.a"}, leaf: "a", def: Main, branches: []string{Main}, incomplete: true}},
		{"malformed middle line", func(t *testing.T) string {
			return hdr + msg(t, "a", "", "user", "hi") + "{not json\n" + msg(t, "b", "a", "assistant", "yo")
		}, want{shown: []string{"n.a", "x.3:malformed-line", "n.b"}, leaf: "b", def: Main, branches: []string{Main}}},
		{"blank lines are skipped", func(t *testing.T) string {
			return hdr + "\n  \n" + msg(t, "a", "", "user", "hi")
		}, want{shown: []string{"n.a"}, leaf: "a", def: Main, branches: []string{Main}}},
		{"duplicate id, later wins", func(t *testing.T) string {
			return hdr + msg(t, "a", "", "user", "first") + msg(t, "b", "a", "assistant", "yo") + msg(t, "a", "", "user", "second")
			// Pi's leaf is the replacing a, whose path is just a; b now
			// hangs off a later line and starts its own branch.
		}, want{shown: []string{"n.a"}, leaf: "a", def: Main, branches: []string{Main, "b.b"}}},
		{"missing parent", func(t *testing.T) string {
			return hdr + msg(t, "a", "", "user", "hi") + msg(t, "c", "gone", "user", "orphan") + msg(t, "d", "c", "assistant", "yo")
		}, want{shown: []string{"x.missing.c:missing-parent", "n.c", "n.d"}, leaf: "d", def: "b.c", branches: []string{Main, "b.c"}}},
		{"loop", func(t *testing.T) string {
			return hdr + msg(t, "a", "", "user", "hi") + msg(t, "p", "q", "user", "p") + msg(t, "q", "p", "assistant", "q") + msg(t, "r", "q", "user", "r")
		}, want{shown: []string{"x.loop.p:loop", "n.p", "n.q", "n.r"}, leaf: "r", def: "b.r", branches: []string{Main, "b.p", "b.r"}}},
		{"self parent", func(t *testing.T) string {
			return hdr + msg(t, "a", "a", "user", "me")
		}, want{shown: []string{"x.loop.a:loop", "n.a"}, leaf: "a", def: "b.a", branches: []string{Main, "b.a"}}},
		{"compaction marker in place", func(t *testing.T) string {
			return hdr + msg(t, "a", "", "user", "hi") + msg(t, "b", "a", "assistant", "yo") +
				ent(t, "compaction", "c", "b", map[string]any{"summary": "we said hi", "firstKeptEntryId": "b", "tokensBefore": 10,
					"retainedTail": []any{map[string]any{"role": "assistant", "content": "yo"}}}) +
				msg(t, "d", "c", "user", "more")
		}, want{shown: []string{"n.a", "n.b", "n.c", "n.d"}, leaf: "d", def: Main, branches: []string{Main}}},
		{"hidden entry types", func(t *testing.T) string {
			return hdr + ent(t, "model_change", "m", "", map[string]any{"provider": "p", "modelId": "x"}) +
				ent(t, "thinking_level_change", "t", "m", map[string]any{"thinkingLevel": "off"}) +
				msg(t, "a", "t", "user", "hi") +
				ent(t, "label", "l", "a", map[string]any{"targetId": "a", "label": "x"}) +
				ent(t, "session_info", "i", "l", map[string]any{"name": "n"}) +
				ent(t, "custom", "c", "i", map[string]any{"customType": "ext", "data": map[string]any{"n": 1}}) +
				ent(t, "custom_message", "h", "c", map[string]any{"customType": "ext", "content": "hidden", "display": false}) +
				ent(t, "custom_message", "v", "h", map[string]any{"customType": "ext", "content": "shown", "display": true})
		}, want{shown: []string{"n.a", "n.v"}, leaf: "v", def: Main, branches: []string{Main}}},
		{"unknown type and role", func(t *testing.T) string {
			return hdr + msg(t, "a", "", "user", "hi") + ent(t, "future_thing", "f", "a", nil) +
				msg(t, "b", "f", "bashExecution", "ls")
		}, want{shown: []string{"n.a", "n.f:unknown-entry-type", "n.b:unknown-role"}, leaf: "b", def: Main, branches: []string{Main}}},
		{"bad field keeps the entry in the tree", func(t *testing.T) string {
			return hdr + msg(t, "a", "", "user", "hi") +
				`{"type":"message","id":"b","parentId":"a","message":{"role":"assistant","content":[{"type":"text","text":5}]}}` + "\n" +
				msg(t, "c", "b", "user", "after")
		}, want{shown: []string{"n.a", "n.b:malformed-entry", "n.c"}, leaf: "c", def: Main, branches: []string{Main}}},
		{"entry without id is a malformed line", func(t *testing.T) string {
			return hdr + msg(t, "a", "", "user", "hi") + `{"type":"message","parentId":"a"}` + "\n"
		}, want{shown: []string{"n.a", "x.3:malformed-line"}, leaf: "a", def: Main, branches: []string{Main}}},
		{"second header line", func(t *testing.T) string {
			return hdr + msg(t, "a", "", "user", "hi") + hdr
		}, want{shown: []string{"n.a", "x.3:unexpected-header"}, leaf: "a", def: Main, branches: []string{Main}}},
		{"forked from an earlier session", func(t *testing.T) string {
			return `{"type":"session","version":3,"id":"s2","cwd":"/p","parentSession":"/elsewhere.jsonl"}` + "\n" + msg(t, "a", "", "user", "hi")
		}, want{shown: []string{"x.forked:forked-from-earlier-session", "n.a"}, leaf: "a", def: Main, branches: []string{Main}}},
		{"fork: later child starts a branch", func(t *testing.T) string {
			return hdr + msg(t, "a", "", "user", "hi") + msg(t, "b", "a", "assistant", "one") +
				msg(t, "c", "a", "assistant", "two") + msg(t, "d", "b", "user", "on main")
		}, want{shown: []string{"n.a", "n.b", "n.d"}, leaf: "d", def: Main, branches: []string{Main, "b.c"}}},
		{"fork: default leaf on the later branch", func(t *testing.T) string {
			return hdr + msg(t, "a", "", "user", "hi") + msg(t, "b", "a", "assistant", "one") +
				msg(t, "c", "a", "assistant", "two")
		}, want{shown: []string{"n.a", "n.c"}, leaf: "c", def: "b.c", branches: []string{Main, "b.c"}}},
		{"second root (resetLeaf)", func(t *testing.T) string {
			return hdr + msg(t, "a", "", "user", "hi") + msg(t, "z", "", "user", "again")
		}, want{shown: []string{"n.z"}, leaf: "z", def: "b.z", branches: []string{Main, "b.z"}}},
		{"hashed ids", func(t *testing.T) string {
			return hdr + msg(t, "call_x|fc_y", "", "user", "hi")
		}, want{shown: []string{"n." + hashed("call_x|fc_y")}, leaf: "call_x|fc_y", def: Main, branches: []string{Main}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.write(t, tt.file(t))
			s := f.mustRead(t)
			p, err := s.Page("", 0)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, b := range s.Branches() {
				names = append(names, b.Name)
			}
			got := want{shown: shown(p), leaf: s.LeafID(), def: s.DefaultBranch(), branches: names, incomplete: s.Incomplete()}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tt.want)
			}
			if p.Branch != tt.want.def {
				t.Fatalf("page branch %q, want %q", p.Branch, tt.want.def)
			}
		})
	}
}

// TestMalformedOnEveryBranch: a notice at its file position appears on
// every branch, after a branch's tip too.
func TestMalformedOnEveryBranch(t *testing.T) {
	f := newFixture(t)
	f.write(t, hdr+msg(t, "a", "", "user", "hi")+msg(t, "b", "a", "assistant", "one")+
		"oops\n"+msg(t, "c", "a", "assistant", "two")+msg(t, "d", "c", "user", "more"))
	s := f.mustRead(t)
	for branch, want := range map[string][]string{
		Main:  {"n.a", "n.b", "x.4:malformed-line"},
		"b.c": {"n.a", "x.4:malformed-line", "n.c", "n.d"},
	} {
		p, err := s.Page(branch, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := shown(p); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v, want %v", branch, got, want)
		}
	}
	_, err := s.Page("b.nope", 0)
	wantCode(t, err, "unknown-branch")
}

// TestMissingParentNamesUnreadableLines: the notice names the unreadable
// lines just before the entry as the likely place of its parent.
func TestMissingParentNamesUnreadableLines(t *testing.T) {
	f := newFixture(t)
	f.write(t, hdr+msg(t, "a", "", "user", "hi")+"{broken\n"+msg(t, "c", "b", "assistant", "yo"))
	s := f.mustRead(t)
	p, err := s.Page("", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := shown(p), []string{"x.3:malformed-line", "x.missing.c:missing-parent", "n.c"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("%v, want %v", got, want)
	}
	if d := p.Parts[1].Notice.Detail; !strings.Contains(d, "unreadable line 3") {
		t.Fatalf("detail %q does not name line 3", d)
	}
}

// TestContent: blocks are the live protocol.Block shapes.
func TestContent(t *testing.T) {
	f := newFixture(t)
	asst := map[string]any{"role": "assistant", "stopReason": "toolUse", "content": []any{
		map[string]any{"type": "thinking", "thinking": "hmm", "thinkingSignature": "sig"},
		map[string]any{"type": "thinking", "thinking": "", "redacted": true, "thinkingSignature": "secret"},
		map[string]any{"type": "toolCall", "id": "call_1", "name": "bash", "arguments": map[string]any{"command": "ls"}},
		map[string]any{"type": "hologram", "data": "x"},
	}}
	tool := map[string]any{"role": "toolResult", "toolCallId": "call_1", "toolName": "bash", "isError": true,
		"content": []any{map[string]any{"type": "image", "data": "AAAA", "mimeType": "image/png"}}}
	f.write(t, hdr+jsonLine(t, map[string]any{"type": "message", "id": "u", "parentId": nil, "message": map[string]any{"role": "user", "content": "plain string"}})+
		ent(t, "message", "a", "u", map[string]any{"message": asst})+
		ent(t, "message", "r", "a", map[string]any{"message": tool}))
	s := f.mustRead(t)
	ps := allParts(t, s, "")
	b, _ := json.Marshal(ps)
	for _, want := range []string{
		`"content":{"type":"text","text":"plain string"}`,
		`"content":{"type":"thinking","text":"hmm"}`,
		`"block":1,"fragment":0,"lastFragment":true,"content":{"type":"unavailable"}`,
		`"content":{"type":"toolCall","toolCallId":"call_1","toolName":"bash","args":{"command":"ls"}}`,
		`"block":3,"fragment":0,"lastFragment":true,"content":{"type":"unavailable"}`,
		`"stopReason":"toolUse"`,
		`"tool":{"callId":"call_1","name":"bash","isError":true}`,
		`"content":{"type":"image","mimeType":"image/png"}`,
	} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("parts lack %s\n%s", want, b)
		}
	}
	for _, leak := range []string{"sig", "secret", "AAAA"} {
		if bytes.Contains(b, []byte(leak)) {
			t.Errorf("parts leak %q", leak)
		}
	}
}
