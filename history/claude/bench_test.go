package claude

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// bigTranscript writes a transcript of about size bytes: prompts and
// answers of one chain, each a text block of about 900 bytes.
func bigTranscript(b *testing.B, size int) (Ref, string) {
	b.Helper()
	project := filepath.Join(b.TempDir(), "work")
	ref := Ref{ConfigDir: b.TempDir(), Project: project, Session: goldenSession}
	p, err := ref.Path()
	if err != nil {
		b.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		b.Fatal(err)
	}
	fh, err := os.Create(p)
	if err != nil {
		b.Fatal(err)
	}
	defer fh.Close()
	w := bufio.NewWriter(fh)
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 20)
	parent := any(nil)
	for n, i := 0, 0; n < size; i++ {
		role := []string{"user", "assistant"}[i%2]
		id := fmt.Sprintf("90000000-0000-4000-8000-%012d", i)
		line, _ := json.Marshal(map[string]any{"parentUuid": parent, "isSidechain": false, "type": role,
			"message": map[string]any{"role": role, "content": []any{map[string]any{"type": "text", "text": text}}},
			"uuid":    id, "timestamp": "2026-12-02T18:12:17.544Z", "cwd": project, "sessionId": goldenSession, "version": Version})
		w.Write(append(line, '\n'))
		n += len(line) + 1
		parent = id
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	return ref, p
}

// lineSplit times one bufio.Scanner line count of path, the floor both
// benchmarks are measured against.
func lineSplit(b *testing.B, path string) time.Duration {
	b.Helper()
	start := time.Now()
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
	}
	return time.Since(start)
}

// BenchmarkClaudeRead10MB reads a 10 MB transcript and its default
// branch's messages, as a Claude conversation's first observe does,
// against a line count of the same file in the same round (x-scanner).
func BenchmarkClaudeRead10MB(b *testing.B) {
	ref, path := bigTranscript(b, 10<<20)
	rounds(b, path, func() (*Transcript, error) { return Read(ref) })
}

// BenchmarkClaudeFollowUnchanged10MB is a later observe of the same
// transcript: a Follow of the one read before (its bytes hashed again,
// nothing appended to parse) and the branch's messages.
func BenchmarkClaudeFollowUnchanged10MB(b *testing.B) {
	ref, path := bigTranscript(b, 10<<20)
	prev, err := Read(ref)
	if err != nil {
		b.Fatal(err)
	}
	rounds(b, path, func() (*Transcript, error) { return Follow(prev) })
}

// rounds times, each round, a line count of path and then read and the
// default branch's messages, and reports the ratio of their sums.
func rounds(b *testing.B, path string, read func() (*Transcript, error)) {
	b.Helper()
	lineSplit(b, path) // the file into the page cache
	var base, took time.Duration
	for b.Loop() {
		base += lineSplit(b, path)
		start := time.Now()
		t, err := read()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := t.Messages(t.DefaultLeaf()); err != nil {
			b.Fatal(err)
		}
		took += time.Since(start)
	}
	b.ReportMetric(float64(took)/float64(base), "x-scanner")
}
