package pi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/mosaic-agents/mosaic/engine"
)

// recordings returns the stdout files of the pinned Pi recordings.
func recordings(t testing.TB, suffix string) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "recordings", "*"+suffix))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no recordings *%s: %v", suffix, err)
	}
	out := make(map[string][]byte)
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(p)] = b
	}
	return out
}

// readAll drains a LineReader, recording too-long errors as "!TOOLONG".
func readAll(t testing.TB, lr *engine.LineReader) []string {
	t.Helper()
	var lines []string
	for {
		line, err := lr.Next()
		switch {
		case errors.Is(err, engine.ErrLineTooLong):
			lines = append(lines, "!TOOLONG")
			continue
		case errors.Is(err, io.EOF):
			return lines
		case err != nil:
			t.Fatalf("Next: %v", err)
		}
		lines = append(lines, string(line))
	}
}

func TestLineReader(t *testing.T) {
	tests := []struct {
		name string
		in   string
		max  int
		want []string
	}{
		{"lf", "a\nb\n", 0, []string{"a", "b"}},
		{"crlf", "a\r\nb\r\n", 0, []string{"a", "b"}},
		{"only one cr dropped", "a\r\r\n", 0, []string{"a\r"}},
		{"lone cr is data", "a\rb\n", 0, []string{"a\rb"}},
		{"u2028 and u2029 inside", "{\"t\":\"x\u2028y\u2029z\"}\n", 0, []string{"{\"t\":\"x\u2028y\u2029z\"}"}},
		{"nel and vt are data", "a\u0085b\vc\fd\n", 0, []string{"a\u0085b\vc\fd"}},
		{"unterminated tail", "a\nb", 0, []string{"a", "b"}},
		{"empty lines kept", "\n\na\n", 0, []string{"", "", "a"}},
		{"exactly max", "abcd\nx\n", 4, []string{"abcd", "x"}},
		{"over max then resync", "abcdef\nx\n", 4, []string{"!TOOLONG", "x"}},
		{"over max with crlf", "abcdefgh\r\nxy\r\n", 4, []string{"!TOOLONG", "xy"}},
		{"over max at eof", "x\nabcdefgh", 4, []string{"x", "!TOOLONG"}},
	}
	readers := map[string]func(io.Reader) io.Reader{
		"whole":   func(r io.Reader) io.Reader { return r },
		"onebyte": iotest.OneByteReader,
		"half":    iotest.HalfReader,
	}
	for _, tc := range tests {
		for rn, wrap := range readers {
			t.Run(tc.name+"/"+rn, func(t *testing.T) {
				got := readAll(t, engine.NewLineReader(wrap(strings.NewReader(tc.in)), tc.max))
				if strings.Join(got, "|") != strings.Join(tc.want, "|") {
					t.Fatalf("got %q, want %q", got, tc.want)
				}
			})
		}
	}
}

// TestLineReaderLongLineGrowsBuffer crosses the initial buffer size.
func TestLineReaderLongLineGrowsBuffer(t *testing.T) {
	long := strings.Repeat("é", 100_000) // 200,000 bytes, UTF-8 split across every read boundary
	in := long + "\n" + "tail\n"
	got := readAll(t, engine.NewLineReader(iotest.HalfReader(strings.NewReader(in)), 0))
	if len(got) != 2 || got[0] != long || got[1] != "tail" {
		t.Fatalf("got %d lines (first %d bytes)", len(got), len(got[0]))
	}
}

// TestRecordingsFrameE2 frames every recording, byte by byte, and checks
// each record is one JSON value (E2; the recordings hold no U+2028, so
// TestLineReader is what holds the separator rule).
func TestRecordingsFrameE2(t *testing.T) {
	for name, b := range recordings(t, ".stdout.jsonl") {
		t.Run(name, func(t *testing.T) {
			want := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
			got := readAll(t, engine.NewLineReader(iotest.OneByteReader(bytes.NewReader(b)), 0))
			if len(got) != len(want) {
				t.Fatalf("got %d lines, want %d", len(got), len(want))
			}
			for i, line := range got {
				if !json.Valid([]byte(line)) {
					t.Fatalf("line %d is not one JSON value", i+1)
				}
			}
		})
	}
}

// TestE2SeparatorsAndCRLF builds engine output whose strings hold U+2028,
// U+2029 and CR, sent with CRLF endings.
func TestE2SeparatorsAndCRLF(t *testing.T) {
	text := "one\u2028two\u2029three\rfour"
	rec := `{"type":"message_update","assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":"` + "one\u2028two\u2029three\\rfour" + `"}}`
	in := rec + "\r\n" + rec + "\n"
	lines := readAll(t, engine.NewLineReader(iotest.OneByteReader(strings.NewReader(in)), 0))
	if len(lines) != 2 {
		t.Fatalf("got %d records, want 2", len(lines))
	}
	for _, l := range lines {
		n, err := decodeLine([]byte(l))
		if err != nil {
			t.Fatal(err)
		}
		if n.Update.Delta != text {
			t.Fatalf("delta %q, want %q", n.Update.Delta, text)
		}
	}
}

// TestEncodeRecordS7: ESC, bracketed-paste markers, U+2028/U+2029, LF and
// CR stay inside one JSON string of one record.
func TestEncodeRecordS7(t *testing.T) {
	texts := []string{
		"\x1b[200~pasted\x1b[201~",
		"line one\nline two\r\n/goal not first",
		"sep\u2028a\u2029b",
		"\x00\x07\x1b]0;title\x07 <b>&amp;</b>",
	}
	for _, text := range texts {
		rec, err := encodeRecord(promptCommand{Type: "prompt", ID: "p1", Message: text})
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Count(rec, []byte("\n")) != 1 || rec[len(rec)-1] != '\n' {
			t.Fatalf("record %q is not one line", rec)
		}
		if bytes.Contains(rec, []byte("\u2028")) || bytes.Contains(rec, []byte("\x1b")) {
			t.Fatalf("record %q carries a raw separator or ESC", rec)
		}
		var back promptCommand
		if err := json.Unmarshal(rec, &back); err != nil || back.Message != text {
			t.Fatalf("round trip %q -> %q (%v)", text, back.Message, err)
		}
	}
}

// refSplit is the plain bytes.IndexByte splitter the benchmark compares
// against.
func refSplit(b []byte, each func([]byte)) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			each(bytes.TrimSuffix(b, []byte("\r")))
			return
		}
		each(bytes.TrimSuffix(b[:i], []byte("\r")))
		b = b[i+1:]
	}
}

func FuzzLineReader(f *testing.F) {
	for _, b := range recordings(f, ".stdout.jsonl") {
		f.Add(b, uint16(0))
		f.Add(b, uint16(300))
	}
	f.Add([]byte("a\r\nb\u2028c\n\xe2\x80"), uint16(3))
	f.Fuzz(func(t *testing.T, in []byte, max uint16) {
		// The bound counts a line's bytes before its LF, a CR included.
		var want []string
		for _, raw := range bytes.SplitAfter(in, []byte("\n")) {
			if len(raw) == 0 {
				continue
			}
			body := bytes.TrimSuffix(raw, []byte("\n"))
			if max > 0 && len(body) > int(max) {
				want = append(want, "!TOOLONG")
				continue
			}
			want = append(want, string(bytes.TrimSuffix(body, []byte("\r"))))
		}
		got := readAll(t, engine.NewLineReader(iotest.HalfReader(bytes.NewReader(in)), int(max)))
		if strings.Join(got, "\x00|") != strings.Join(want, "\x00|") {
			t.Fatalf("got %q, want %q", got, want)
		}
	})
}

// BenchmarkFraming frames the recordings (repeated) with the LineReader
// and with a plain bytes.IndexByte splitter, b.N times each, and reports
// the splitter's time divided by the LineReader's as x-of-indexbyte (1.0
// is as fast; below 1 is slower). ns/op covers both loops. No test
// asserts on it.
func BenchmarkFraming(b *testing.B) {
	var one []byte
	for _, r := range recordings(b, ".stdout.jsonl") {
		one = append(one, r...)
	}
	in := bytes.Repeat(one, 64)
	b.SetBytes(int64(len(in)))
	var sink int
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		refSplit(in, func(l []byte) { sink += len(l) })
	}
	plain := time.Since(start)
	start = time.Now()
	for range b.N {
		lr := engine.NewLineReader(bytes.NewReader(in), 0)
		for {
			l, err := lr.Next()
			if err != nil {
				break
			}
			sink += len(l)
		}
	}
	ours := time.Since(start)
	b.ReportMetric(float64(plain)/float64(ours), "x-of-indexbyte")
	_ = sink
}
