package controller

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	hclaude "github.com/mosaic-agents/mosaic/history/claude"
)

const watchSession = "0b7e6f1e-3c1a-4b2a-9d3e-5f6a7b8c9d0e"

// tline is one transcript line of the main chain: a prompt (promptSource
// set), an assistant message or a tool result.
func tline(kind, uuid, parent string) string {
	p := `null`
	if parent != "" {
		p = `"` + parent + `"`
	}
	head := `{"parentUuid":` + p + `,"isSidechain":false,"uuid":"` + uuid + `","sessionId":"` + watchSession + `","version":"2.1.328",`
	switch kind {
	case "prompt":
		return head + `"type":"user","promptSource":"sdk","message":{"role":"user","content":[{"type":"text","text":"hi"}]}}`
	case "result":
		return head + `"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}}`
	}
	return head + `"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"hello"}]}}`
}

// readLines writes lines as the transcript of a fresh Ref and reads it.
func readLines(t *testing.T, lines ...string) *hclaude.Transcript {
	t.Helper()
	ref := hclaude.Ref{ConfigDir: t.TempDir(), Project: "/work/p", Session: watchSession}
	p, err := ref.Path()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tr, err := hclaude.Read(ref)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestCheckTranscript: the foreign-writer and K8 rules of a Claude
// transcript's re-read. A prompt line under a uuid this execution never
// sent is another writer's; an entry that vanished or changed parent is a
// rewrite; the first own prompt after a resume must descend from the
// pinned leaf; tool results and assistant lines are the CLI's own.
func TestCheckTranscript(t *testing.T) {
	const (
		u1, a1, u2, a2, r2, f1 = "00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-0000000000a1",
			"00000000-0000-4000-8000-000000000002", "00000000-0000-4000-8000-0000000000a2",
			"00000000-0000-4000-8000-0000000000b2", "00000000-0000-4000-8000-0000000000f1"
	)
	base := []string{tline("prompt", u1, ""), tline("assistant", a1, u1)}
	ours := func(id string) bool { return id == u2 }
	for _, tc := range []struct {
		name        string
		now         []string
		pinned      string
		foreign, k8 bool
		continued   bool
		leaf        string
	}{
		{"own prompt and reply", append(base[:2:2], tline("prompt", u2, a1), tline("assistant", a2, u2)), "", false, false, false, a2},
		{"resumed, continues the pinned leaf", append(base[:2:2], tline("prompt", u2, a1), tline("result", r2, u2)), a1, false, false, true, r2},
		{"resumed, continues another entry", append(base[:2:2], tline("prompt", u2, u1)), a1, false, true, false, u2},
		{"prompt of another writer", append(base[:2:2], tline("prompt", f1, a1)), "", true, false, false, f1},
		{"entry rewritten", []string{tline("prompt", u1, ""), tline("assistant", a1, "")}, "", true, false, false, ""},
		{"entry removed", []string{tline("prompt", u1, "")}, "", true, false, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := checkTranscript(readLines(t, base...), readLines(t, tc.now...), ours, tc.pinned)
			if (v.foreign != "") != tc.foreign || (v.k8 != "") != tc.k8 || v.continued != tc.continued {
				t.Fatalf("verdict %+v; want foreign %v, k8 %v, continued %v", v, tc.foreign, tc.k8, tc.continued)
			}
			if !tc.foreign && !tc.k8 && v.leaf != tc.leaf {
				t.Fatalf("leaf %s; want %s", v.leaf, tc.leaf)
			}
		})
	}
}

// TestEndsLine: the watch reads a transcript only when it ends with a
// whole line (the CLI may be mid-write).
func TestEndsLine(t *testing.T) {
	p := filepath.Join(t.TempDir(), "t.jsonl")
	for _, tc := range []struct {
		body string
		want bool
	}{{"", true}, {"{}\n", true}, {"{}\n{\"type\":\"us", false}} {
		if err := os.WriteFile(p, []byte(tc.body), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := endsLine(p, int64(len(tc.body))); got != tc.want {
			t.Errorf("endsLine(%q) = %v; want %v", tc.body, got, tc.want)
		}
	}
}
