package claude

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestPromptsFrom: the prompt lines of the golden transcript are its user
// text lines in file order, with the offsets their lines start at; tool
// results, a subagent's (sidechain) user line with a prompt's text and a
// half-written last line are none; from skips what lies before it; a
// transcript shorter than from is ErrShorter; a missing one holds none.
func TestPromptsFrom(t *testing.T) {
	sidechain := `{"parentUuid":null,"isSidechain":true,"agentId":"a1","type":"user","message":{"role":"user","content":[{"type":"text","text":"hello there"}]},"uuid":"5ade0000-0000-4000-8000-000000000002","sessionId":"` + goldenSession + `","version":"2.1.328"}` + "\n"
	half := `{"parentUuid":null,"isSidechain":false,"type":"user","message":{"role":"user","content":[{"type":"text","text":"hel`
	ref, path := setup(t, func(s string) string { return s + sidechain + half })
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	all, err := PromptsFrom(ref, 0)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, p := range all {
		texts = append(texts, p.Text)
		if p.Offset != 0 && raw[p.Offset-1] != '\n' || !strings.Contains(string(raw[p.Offset:]), p.Text) {
			t.Errorf("prompt %q at %d does not start a line holding it", p.Text, p.Offset)
		}
	}
	want := []string{"hello there", "please BASH{setsid sleep 300 & echo started}", "now BASH{touch should-be-denied.txt}", "HANG until interrupted", "[Request interrupted by user]"}
	if !slices.Equal(texts, want) {
		t.Fatalf("prompts %q; want %q", texts, want)
	}
	later, err := PromptsFrom(ref, all[1].Offset+1)
	if err != nil {
		t.Fatal(err)
	}
	if len(later) != 3 || later[0] != all[2] {
		t.Fatalf("prompts after the second's line start: %+v; want the last three", later)
	}
	if size, err := Size(ref); err != nil || size != int64(len(raw)) {
		t.Fatalf("Size = %d, %v; want %d", size, err, len(raw))
	}
	if _, err := PromptsFrom(ref, int64(len(raw))+1); !errors.Is(err, ErrShorter) {
		t.Fatalf("from past the end: %v; want ErrShorter", err)
	}
	gone := ref
	gone.Session = "0b7e6f1e-3c1a-4b2a-9d3e-5f6a7b8c9d0e"
	if ps, err := PromptsFrom(gone, 0); err != nil || len(ps) != 0 {
		t.Fatalf("missing transcript: %v, %v", ps, err)
	}
	if size, err := Size(gone); err != nil || size != 0 {
		t.Fatalf("missing transcript Size = %d, %v", size, err)
	}
	if _, err := PromptsFrom(gone, 10); !errors.Is(err, ErrShorter) {
		t.Fatalf("missing transcript past 0: %v; want ErrShorter", err)
	}
}
