package controller

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/engine"
	"github.com/mosaic-agents/mosaic/protocol"
)

// writeSession writes a Pi v3 session file with n messages, alternately
// user and assistant, each the child of the one before; it returns the
// header id and the last entry's id.
func writeSession(t *testing.T, path, cwd string, n int) (string, string) {
	t.Helper()
	var b strings.Builder
	id := "0196f5a0-0000-7000-8000-00000000beef"
	b.WriteString(`{"type":"session","version":3,"id":"` + id + `","timestamp":"2026-12-01T00:00:00.000Z","cwd":` + quote(cwd) + "}\n")
	parent := "null"
	leaf := ""
	for i := range n {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		leaf = fmt.Sprintf("m%05d", i)
		fmt.Fprintf(&b, `{"type":"message","id":"%s","parentId":%s,"timestamp":"2026-12-01T00:00:01.000Z","message":{"role":"%s","content":[{"type":"text","text":"message %d"}]}}`+"\n",
			leaf, parent, role, i)
		parent = `"` + leaf + `"`
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return id, leaf
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// K8: the engine loading another leaf or another file than the one the
// controller pinned is refused before admission opens: the binding is
// uncertain, prompts refuse preflight with zero engine bytes, and the
// claim stays held (only a proven stop frees it). The pinned leaf with
// Pi's own startup append is accepted, so the check is not just "refuse
// every existing session".
func TestLoadCheck(t *testing.T) {
	tests := []struct {
		name string
		// launch changes what the engine loads, after the controller
		// pinned the session head and before the engine starts.
		launch func(t *testing.T, cv *conversations.Conversation, spec *engine.Spec)
		active bool
		reason string
	}{
		{name: "pinned leaf with Pi's startup append", active: true},
		{
			name: "another leaf",
			launch: func(t *testing.T, cv *conversations.Conversation, _ *engine.Spec) {
				f, err := os.OpenFile(cv.Session, os.O_WRONLY|os.O_APPEND, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				fmt.Fprintf(f, `{"type":"message","id":"f0reign","parentId":"m00002","timestamp":"2026-12-01T00:00:02.000Z","message":{"role":"user","content":"elsewhere"}}`+"\n")
			},
			reason: "engine loaded leaf",
		},
		{
			// The header, the leaf and the size kept: only the bytes show
			// it (loadedUnchanged). A wake or a recover read the file, a
			// writer rewrote it, then Pi loaded it.
			name: "an entry rewritten in place",
			launch: func(t *testing.T, cv *conversations.Conversation, _ *engine.Spec) {
				b, err := os.ReadFile(cv.Session)
				if err != nil {
					t.Fatal(err)
				}
				forged := bytes.Replace(b, []byte("message 0"), []byte("FORGED!!!"), 1)
				if bytes.Equal(forged, b) {
					t.Fatal("no message 0 in the session file")
				}
				if err := os.WriteFile(cv.Session, forged, 0o644); err != nil {
					t.Fatal(err)
				}
			},
			reason: "changed while the engine loaded it",
		},
		{
			name: "another session file",
			launch: func(t *testing.T, cv *conversations.Conversation, spec *engine.Spec) {
				other := filepath.Join(filepath.Dir(cv.Session), "other.jsonl")
				b, err := os.ReadFile(cv.Session)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(other, b, 0o644); err != nil {
					t.Fatal(err)
				}
				for i, a := range spec.Args {
					if a == "--session" {
						spec.Args[i+1] = other
					}
				}
			},
			reason: "not the bound session file",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, plainScript, func(c *Config) {
				writeSession(t, c.Conversation.Session, c.Conversation.Project, 3)
				spec := c.Spec
				c.Spec = func(cv *conversations.Conversation) (engine.Spec, error) {
					s, err := spec(cv)
					if err == nil && tt.launch != nil {
						tt.launch(t, cv, &s)
					}
					return s, err
				}
			})
			k := r.dial()
			if tt.active {
				b := r.waitBinding("active")
				if b["sessionId"] != "0196f5a0-0000-7000-8000-00000000beef" || b["leaf"] == "m00002" || b["leaf"] == "" {
					t.Fatalf("binding %v: want the file's session and Pi's startup entry as leaf", b)
				}
				gen := r.takeover(k)
				k.must(map[string]any{"type": "prompt", "request": "p1", "generation": gen, "text": "go on"}, "receipt")
				return
			}
			b := r.waitBinding("uncertain")
			if b["admission"] != "closed" || !strings.Contains(fmt.Sprint(b["admissionReason"]), tt.reason) {
				t.Fatalf("binding %v: want admission closed by the load check (%q)", b, tt.reason)
			}
			r.ctrl.mu.Lock()
			claim := r.ctrl.st.claim.Record()
			opened := r.ctrl.st.admission
			r.ctrl.mu.Unlock()
			if opened || claim.State != "active" {
				t.Fatalf("admission open %v, claim %s: the claim must stay held, admission closed", opened, claim.State)
			}
			// Fenced: ordinary takeover refuses; recovery control may act,
			// and still nothing reaches the engine.
			k.refused(map[string]any{"type": "takeover", "request": "t1", "generation": r.generation()}, protocol.CodeFenced)
			gen := r.recoveryControl(k)
			k.refused(map[string]any{"type": "prompt", "request": "p1", "generation": gen, "text": "go on"}, protocol.CodePreflight)
			if n := r.prompts(); n != 0 {
				t.Fatalf("engine received %d prompts after a failed load check", n)
			}
			var journaled bool
			for _, e := range r.audit.entries(t) {
				if e["MOSAIC_EVENT"] == "refusal" && e["MOSAIC_REFUSAL"] == "preflight" && strings.Contains(e["MESSAGE"], tt.reason) {
					journaled = true
				}
			}
			if !journaled {
				t.Fatal("the failed load check is not journaled as a preflight refusal")
			}
		})
	}
}

// recoveryControl makes k the controller of a fenced conversation with a
// confirmed acquire-recovery-control and returns the new generation.
func (r *rig) recoveryControl(k *peer) float64 {
	r.t.Helper()
	gen := r.generation()
	cf := k.confirm("acquire-recovery-control", gen)
	m := k.must(map[string]any{"type": "acquire-recovery-control", "request": newID("a-"), "generation": gen, "confirmation": cf}, "control")
	return m["generation"].(float64)
}

// TestSessionHeadRefusesAnOddID: a session whose header or leaf names an
// id Pi never writes (longer than 128 bytes, or outside letters, digits
// and . _ : -) is not pinned: every record naming the session or the
// leaf would carry it. An ordinary session is.
func TestSessionHeadRefusesAnOddID(t *testing.T) {
	for _, tc := range []struct {
		name    string
		edit    func(body, id, leaf string) string
		refused bool
	}{
		{"ordinary", func(b, _, _ string) string { return b }, false},
		{"a leaf id of 2 MiB", func(b, _, leaf string) string {
			return strings.ReplaceAll(b, `"`+leaf+`"`, `"`+strings.Repeat("a", 2<<20)+`"`)
		}, true},
		{"a leaf id with a space", func(b, _, leaf string) string { return strings.ReplaceAll(b, `"`+leaf+`"`, `"a b"`) }, true},
		{"a session id of 129 bytes", func(b, id, _ string) string {
			return strings.Replace(b, `"`+id+`"`, `"`+strings.Repeat("s", 129)+`"`, 1)
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.jsonl")
			id, leaf := writeSession(t, path, "/work/p", 4)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(tc.edit(string(b), id, leaf)), 0o644); err != nil {
				t.Fatal(err)
			}
			h, err := readSessionHead(path)
			if tc.refused {
				if protocol.CodeOf(err) != protocol.CodeUnreadable {
					t.Fatalf("head %q, %q: %v; want it refused unreadable", h.id, h.leaf, err)
				}
				return
			}
			if err != nil || h.id != id || h.leaf != leaf {
				t.Fatalf("head %q %q, %v; want %q %q", h.id, h.leaf, err, id, leaf)
			}
		})
	}
}
