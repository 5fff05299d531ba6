package procfs

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// parseStatFields is ParseStat as it was written first, splitting every
// field into a string: the reference the field counting is held to. It
// splits at ASCII white space only: the kernel writes nothing else after
// the comm, and a comm's own bytes are before its last ')'.
func parseStatFields(b []byte) (Stat, error) {
	open := bytes.IndexByte(b, '(')
	close := bytes.LastIndexByte(b, ')')
	if open < 0 || close < open {
		return Stat{}, fmt.Errorf("no comm")
	}
	rest := strings.FieldsFunc(string(b[close+1:]), func(r rune) bool { return r < 0x80 && isSpace(byte(r)) })
	const first, ppidField, startField = 3, 4, 22
	if len(rest) <= startField-first {
		return Stat{}, fmt.Errorf("short")
	}
	ppid, err := strconv.Atoi(rest[ppidField-first])
	if err != nil {
		return Stat{}, err
	}
	start, err := strconv.ParseUint(rest[startField-first], 10, 64)
	if err != nil {
		return Stat{}, err
	}
	return Stat{Comm: string(b[open+1 : close]), PPID: ppid, StartTime: start}, nil
}

func FuzzParseStatMatchesFields(f *testing.F) {
	f.Add([]byte("12 (sleep) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 4242 19 20\n"))
	f.Add([]byte("12 (a) b (c))  S\t1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 4242\n"))
	f.Add([]byte("12 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, gerr := ParseStat(b)
		want, werr := parseStatFields(b)
		if (gerr == nil) != (werr == nil) || got != want {
			t.Fatalf("%q: ParseStat %+v, %v; by fields %+v, %v", b, got, gerr, want, werr)
		}
	})
}

// TestReadLineLongerThanBuffer: a line that does not fit the buffer is
// read whole the long way, never cut at the buffer.
func TestReadLineLongerThanBuffer(t *testing.T) {
	whole, err := read(Self, "stat")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 16, len(whole) - 1, len(whole), len(whole) + 1, statBuf} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			got, err := readLine(Self, "stat", make([]byte, n))
			if err != nil {
				t.Fatal(err)
			}
			// The utime and stime fields move between reads: compare
			// the shape (fields and the comm), not the bytes.
			if len(bytes.Fields(got)) != len(bytes.Fields(whole)) || !bytes.HasSuffix(got, []byte("\n")) {
				t.Fatalf("readLine with %d bytes = %q, whole %q", n, got, whole)
			}
		})
	}
}

// TestReadStatBufferStaysOnStack: ReadStat allocates only the path (twice:
// the string and the system call's copy) and the comm. Its line buffer
// moves to the heap as soon as anything it holds escapes, ParseStat's
// errors included, and a stop reads this file for each of its members.
func TestReadStatBufferStaysOnStack(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector moves the buffer to the heap itself; make check runs this without it")
	}
	allocs := testing.AllocsPerRun(50, func() {
		if _, err := ReadStat(Self); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 3 {
		t.Fatalf("ReadStat allocates %v times, want at most 3 (path, its C string, comm)", allocs)
	}
}
