package history

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAppendedLines: a Read gives every complete line, the header first;
// a Follow only the complete lines after its prev, never a half line.
func TestAppendedLines(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.jsonl")
	first := hdr + msg(t, "m1", "", "user", "one")
	if err := os.WriteFile(p, []byte(first), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Read(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := join(s.AppendedLines()); got != first {
		t.Fatalf("Read's lines %q, want %q", got, first)
	}
	more := msg(t, "m2", "m1", "assistant", "two")
	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(more + `{"type":"message","id":"m3"`)
	f.Close()
	s2, err := Follow(p, s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := join(s2.AppendedLines()); got != more {
		t.Fatalf("Follow's lines %q, want %q", got, more)
	}
}

func join(lines [][]byte) string {
	var b strings.Builder
	for _, l := range lines {
		b.Write(l)
		b.WriteByte('\n')
	}
	return b.String()
}
