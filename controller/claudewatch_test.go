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
