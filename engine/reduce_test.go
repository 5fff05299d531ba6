package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
	"unicode/utf8"
)

// TestReduce: an oversize value keeps its structure; strings are cut on
// whole escapes and UTF-8 sequences, arrays lose elements only past the
// budget, and the Clip names each cut.
func TestReduce(t *testing.T) {
	big := strings.Repeat("é", MaxLiveString) // 2 bytes each: twice the bound
	esc := strings.Repeat(`\u00e9`, MaxLiveString/6+1)
	many := make([]string, 0, 3000)
	for range 3000 {
		many = append(many, `"`+strings.Repeat("x", 1000)+`"`)
	}
	tests := []struct {
		name    string
		in      string
		paths   []string
		dropped bool
		err     error
	}{
		{"small value unchanged", `{"type":"x","n":[1,2.5e3,-0,true,false,null],"s":"a\"b"}`, nil, false, nil},
		{"long string cut on a rune", `{"type":"x","text":"` + big + `"}`, []string{"/text"}, false, nil},
		{"long escaped string cut on an escape", `{"type":"x","m":{"c":[{"t":"` + esc + `"}]}}`, []string{"/m/c/0/t"}, false, nil},
		{"elements past the budget dropped", `{"type":"x","a":[` + strings.Join(many, ",") + `],"willRetry":true}`, []string{"/a"}, true, nil},
		{"not JSON", `{"type":"x",` + strings.Repeat("?", 100), nil, false, ErrReduce},
		{"two values", `{"type":"x"} {}`, nil, false, ErrReduce},
		{"too deep", strings.Repeat("[", maxDepth+2), nil, false, ErrReduce},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, clip, err := reduce(strings.NewReader(tc.in))
			if tc.err != nil || err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err %v, want %v", err, tc.err)
				}
				return
			}
			if len(out) > reduceHard {
				t.Fatalf("reduced to %d bytes, over %d", len(out), reduceHard)
			}
			if !json.Valid(out) || !utf8.Valid(out) {
				t.Fatalf("reduced copy is not valid JSON: %.200q", out)
			}
			if strings.Join(clip.Paths, " ") != strings.Join(tc.paths, " ") && !(tc.dropped && clip.Dropped > 0) {
				t.Fatalf("clip paths %q, want %q", clip.Paths, tc.paths)
			}
			if (clip.Dropped > 0) != tc.dropped {
				t.Fatalf("dropped %d, want dropped %v", clip.Dropped, tc.dropped)
			}
			if len(tc.paths) == 0 && !tc.dropped {
				var a, b any
				json.Unmarshal([]byte(tc.in), &a)
				json.Unmarshal(out, &b)
				if ja, _ := json.Marshal(a); !bytes.Equal(ja, mustJSON(t, b)) {
					t.Fatalf("an uncut value changed: %s", out)
				}
			}
			if tc.dropped {
				var v struct {
					WillRetry bool `json:"willRetry"`
				}
				if json.Unmarshal(out, &v) != nil || !v.WillRetry {
					t.Fatal("a member after the dropped elements was lost")
				}
			}
		})
	}
	// The hard bound: structure that cannot be dropped (object members)
	// past it is a line too long.
	var obj strings.Builder
	obj.WriteString(`{"type":"x","o":{`)
	for i := 0; obj.Len() < reduceHard+100; i++ {
		fmt.Fprintf(&obj, `"k%d":%d,`, i, i)
	}
	obj.WriteString(`"end":0}}`)
	if _, _, err := reduce(strings.NewReader(obj.String())); !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("structure past the hard bound: %v, want ErrLineTooLong", err)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// lineSource streams one JSON line of an assistant message_end whose text
// is n bytes, then a second small line, without ever holding the text.
type lineSource struct {
	head, tail []byte
	n          int64
	sent       int64
	stage      int
}

func newLineSource(n int64) *lineSource {
	return &lineSource{
		head: []byte(`{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"`),
		tail: []byte(`"}],"stopReason":"stop"}}` + "\n" + `{"type":"agent_settled"}` + "\n"),
		n:    n,
	}
}

func (s *lineSource) Read(p []byte) (int, error) {
	switch s.stage {
	case 0:
		k := copy(p, s.head)
		s.head = s.head[k:]
		if len(s.head) == 0 {
			s.stage = 1
		}
		return k, nil
	case 1:
		k := int64(len(p))
		if k > s.n-s.sent {
			k = s.n - s.sent
		}
		for i := range p[:k] {
			p[i] = 'a' + byte((s.sent+int64(i))%26)
		}
		s.sent += k
		if s.sent == s.n {
			s.stage = 2
		}
		return int(k), nil
	case 2:
		k := copy(p, s.tail)
		s.tail = s.tail[k:]
		if len(s.tail) == 0 {
			s.stage = 3
		}
		return k, nil
	}
	return 0, io.EOF
}

// TestReduceKeepsMemoryBounded: a line just under the 256 MiB limit is
// read with a bounded amount of memory allocated in all (not merely in
// use): the reader never holds the line. One byte more than the limit is
// a line too long, and the next line still reads.
func TestReduceKeepsMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("streams 512 MiB")
	}
	text := int64(DefaultLineLimit) - 200
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	lr := NewLineReader(newLineSource(text), 0)
	lr.Reduce(DefaultLineLimit)
	line, err := lr.Next()
	if err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	// Holding the line would take 256 MiB; the reader's buffer, the
	// reduced copy and their growth take a few MiB (under -race, and with
	// whatever else the process allocates meanwhile, more).
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
		t.Fatalf("reading a %d-byte line allocated %d bytes; want under 64 MiB", text, alloc)
	} else {
		t.Logf("reading a %d-byte line allocated %d bytes in all", text, alloc)
	}
	var n struct {
		Message struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
			StopReason string `json:"stopReason"`
		} `json:"message"`
	}
	if err := json.Unmarshal(line, &n); err != nil || len(n.Message.Content) != 1 || len(n.Message.Content[0].Text) != MaxLiveString ||
		n.Message.StopReason != "stop" || lr.Clip() == nil || lr.Clip().Bytes <= text || !lr.Clip().Under("/message/content/0") {
		t.Fatalf("reduced line: %v, %d bytes of text, clip %+v", err, len(n.Message.Content[0].Text), lr.Clip())
	}
	if next, err := lr.Next(); err != nil || string(next) != `{"type":"agent_settled"}` || lr.Clip() != nil {
		t.Fatalf("the line after: %q, %v", next, err)
	}

	lr = NewLineReader(newLineSource(int64(DefaultLineLimit)), 0)
	lr.Reduce(DefaultLineLimit)
	if _, err := lr.Next(); !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("a line over the limit: %v, want ErrLineTooLong", err)
	}
	if next, err := lr.Next(); err != nil || string(next) != `{"type":"agent_settled"}` {
		t.Fatalf("the line after one too long: %q, %v", next, err)
	}
}

// FuzzReduce: whatever the input, reduce returns valid JSON no larger
// than its hard bound, or an error; an input it did not cut comes back
// with the same meaning.
func FuzzReduce(f *testing.F) {
	f.Add([]byte(`{"type":"message_end","message":{"content":[{"text":"h\u00e9\ud83d\ude00"}]}}`))
	f.Add([]byte(`[1,2,{"a":"b"}]`))
	f.Add([]byte("\"\xff\xfe\""))
	f.Fuzz(func(t *testing.T, in []byte) {
		out, clip, err := reduce(bytes.NewReader(in))
		if err != nil {
			return
		}
		if len(out) > reduceHard {
			t.Fatalf("%d bytes", len(out))
		}
		if !json.Valid(in) {
			// Invalid UTF-8 inside strings is copied as found (Pi's
			// output is UTF-8; decodeLine then replaces it).
			return
		}
		if !json.Valid(out) {
			t.Fatalf("valid %q reduced to invalid %q", in, out)
		}
		if clip.Strings == 0 && clip.Dropped == 0 {
			var a, b any
			if json.Unmarshal(in, &a) == nil && json.Unmarshal(out, &b) == nil && !bytes.Equal(mustJSON(t, a), mustJSON(t, b)) {
				t.Fatalf("uncut %q changed to %q", in, out)
			}
		}
	})
}

func BenchmarkReduce(b *testing.B) {
	line := []byte(`{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"` + strings.Repeat("0123456789abcdef", 18<<16) + `"}]}}`)
	b.SetBytes(int64(len(line)))
	for range b.N {
		if _, _, err := reduce(bytes.NewReader(line)); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzLineReaderReduce: with reduction on, every line still comes back
// exactly once and in order: whole up to the bound, reduced (the same
// JSON value, being far under the string bound) between the bound and the
// limit, refused past the limit or when it is not one JSON value.
func FuzzLineReaderReduce(f *testing.F) {
	// Pi's recordings (engine/pi/testdata) are the realistic seeds.
	paths, err := filepath.Glob(filepath.Join("pi", "testdata", "recordings", "*.stdout.jsonl"))
	if err != nil || len(paths) == 0 {
		f.Fatalf("no recordings: %v", err)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint16(40), uint16(400))
	}
	f.Add([]byte("{\"a\":\"bc\"}\r\n[1, 2]  \nnot json at all\n{}"), uint16(3), uint16(12))
	f.Fuzz(func(t *testing.T, in []byte, max, limit uint16) {
		if max == 0 || limit <= max {
			return
		}
		var want []string
		for _, raw := range bytes.SplitAfter(in, []byte("\n")) {
			if len(raw) == 0 {
				continue
			}
			body := bytes.TrimSuffix(raw, []byte("\n"))
			switch {
			case len(body) <= int(max):
				want = append(want, string(bytes.TrimSuffix(body, []byte("\r"))))
			case len(body) > int(limit):
				want = append(want, "!TOOLONG")
			default:
				out, _, err := reduce(bytes.NewReader(body))
				if err != nil {
					want = append(want, "!REDUCE")
				} else {
					want = append(want, string(out))
				}
			}
		}
		lr := NewLineReader(iotest.HalfReader(bytes.NewReader(in)), int(max))
		lr.Reduce(int64(limit))
		var got []string
		for {
			line, err := lr.Next()
			switch {
			case errors.Is(err, ErrLineTooLong):
				got = append(got, "!TOOLONG")
				continue
			case errors.Is(err, ErrReduce):
				got = append(got, "!REDUCE")
				continue
			case errors.Is(err, io.EOF):
			case err != nil:
				t.Fatalf("Next: %v", err)
			default:
				got = append(got, string(line))
				continue
			}
			break
		}
		if strings.Join(got, "\x00|") != strings.Join(want, "\x00|") {
			t.Fatalf("got %q, want %q", got, want)
		}
	})
}
