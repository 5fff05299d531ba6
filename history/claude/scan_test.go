package claude

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// TestSplitLinesIsScanner: splitLines cuts exactly the lines a
// bufio.Scanner of ScanLines with the same largest token cuts (CRs before
// an LF and at the end dropped, a final line without LF kept, empty lines
// kept), and stops where the scanner refuses a line as too long, on
// random data around that bound, cut in batches of any number of lines.
func TestSplitLinesIsScanner(t *testing.T) {
	const max = 64
	r := rand.New(rand.NewPCG(18, 70))
	pieces := []string{"a", "bc", "\n", "\r\n", "\r", " ", "\n\n", strings.Repeat("x", max-1), strings.Repeat("y", max), "{}"}
	for i := range 3000 {
		var b strings.Builder
		for range r.IntN(12) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		data := []byte(b.String())
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 0, 16), max)
		var want [][]byte
		for sc.Scan() {
			want = append(want, append([]byte(nil), sc.Bytes()...))
		}
		var got [][]byte
		rest, tooLong := data, false
		for len(rest) > 0 && !tooLong {
			n := 1 + r.IntN(4)
			before := len(got)
			got, rest, tooLong = splitLines(got, rest, max, n)
			if len(got)-before > n {
				t.Fatalf("case %d %q: a batch of %d lines cut %d", i, data, n, len(got)-before)
			}
		}
		if tooLong != (sc.Err() == bufio.ErrTooLong) || len(got) != len(want) {
			t.Fatalf("case %d %q: %d lines, too long %v; the scanner: %d lines, %v", i, data, len(got), tooLong, len(want), sc.Err())
		}
		for k := range got {
			if !bytes.Equal(got[k], want[k]) {
				t.Fatalf("case %d %q: line %d is %q, the scanner's %q", i, data, k, got[k], want[k])
			}
		}
	}
}

// TestParallelScanMatchesOneAtATime: a read whose lines are decoded on
// several goroutines finds what a read decoding them one at a time finds,
// the same transcript or the same refusal, whatever the lines hold and
// wherever a bad one is: the golden transcript, with blank lines and CRLF
// endings, without its last LF, and with a line that is not JSON, one of
// another version, one of another session and a repeated entry put at
// each position in turn.
func TestParallelScanMatchesOneAtATime(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	}
	t.Cleanup(func() { parallelMin, scanBatch = 1<<20, 4096 })
	read := func(t *testing.T, ref Ref, parallel bool) (*Transcript, error) {
		parallelMin, scanBatch = math.MaxInt, 4096
		if parallel {
			parallelMin, scanBatch = 0, 7 // batches that split the transcript anywhere
		}
		return Read(ref)
	}
	var golden []string
	setup(t, func(body string) string {
		golden = strings.SplitAfter(strings.TrimSuffix(body, "\n"), "\n")
		return body
	})
	bad := map[string]func(line string) string{
		"not JSON":        func(string) string { return "{\"type\":\n" },
		"another version": func(l string) string { return strings.Replace(l, `"version":"`+Version, `"version":"2.0.0`, 1) },
		"another session": func(l string) string {
			return strings.Replace(l, goldenSession, "00000000-0000-4000-8000-000000000000", 1)
		},
		"a repeated entry": func(l string) string { return l + l },
	}
	cases := map[string][]string{
		"golden":            golden,
		"blank lines, CRLF": mapLines(golden, func(i int, l string) string { return "\n \t\n" + strings.Replace(l, "\n", "\r\n", 1) }),
		"no last LF":        append(append([]string(nil), golden[:len(golden)-1]...), strings.TrimSuffix(golden[len(golden)-1], "\n")),
	}
	for name, edit := range bad {
		for _, at := range []int{0, 1, len(golden) / 2, len(golden) - 1} {
			cases[fmt.Sprintf("%s at line %d", name, at+1)] = mapLines(golden, func(i int, l string) string {
				if i == at {
					return edit(l)
				}
				return l
			})
		}
	}
	for name, lines := range cases {
		t.Run(name, func(t *testing.T) {
			ref, _ := setup(t, func(string) string { return strings.Join(lines, "") })
			one, errOne := read(t, ref, false)
			par, errPar := read(t, ref, true)
			if fmt.Sprint(errOne) != fmt.Sprint(errPar) {
				t.Fatalf("one at a time: %v; in parallel: %v", errOne, errPar)
			}
			if errOne == nil && !reflect.DeepEqual(one, par) {
				same(t, one, par)
				t.Fatalf("the transcripts differ in what they cover: %+v %+v", one, par)
			}
		})
	}
}

// mapLines maps every line of lines through f.
func mapLines(lines []string, f func(i int, l string) string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = f(i, l)
	}
	return out
}
