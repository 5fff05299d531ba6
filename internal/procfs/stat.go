package procfs

import (
	"bytes"
	"fmt"
	"strconv"
)

// Stat is what mosaic reads from /proc/<pid>/stat.
type Stat struct {
	Comm      string // field 2, without its parentheses
	PPID      int    // field 4
	StartTime uint64 // field 22: clock ticks (ClockTicks) since boot
}

// ReadStat reads /proc/<pid>/stat. A process that is gone is
// fs.ErrNotExist.
func ReadStat(pid int) (Stat, error) {
	// A stop reads this file for every member before it signals any: one
	// read into a buffer on the stack, without the read that only sees
	// EOF, when the line fits (it is one line; a comm is at most 15 bytes).
	var buf [statBuf]byte
	b, err := readLine(pid, "stat", buf[:])
	if err != nil {
		return Stat{}, err
	}
	st, err := ParseStat(b)
	if err != nil {
		return Stat{}, fmt.Errorf("%s: %w", Path(pid, "stat"), err)
	}
	return st, nil
}

// ParseStat parses the contents of /proc/<pid>/stat. The command name lies
// between the first '(' and the last ')': it may itself contain spaces and
// parentheses, so splitting on spaces before the last ')' would misread
// every later field.
func ParseStat(b []byte) (Stat, error) {
	open := bytes.IndexByte(b, '(')
	close := bytes.LastIndexByte(b, ')')
	if open < 0 || close < open {
		return Stat{}, fmt.Errorf("stat: no (comm): %q", excerpt(b))
	}
	// Fields after the comm start at field 3 (state); each is found by
	// counting separators, without splitting the line into strings.
	const ppidField, startField = 4, 22
	ppidText, startText, n := fieldsAt(b[close+1:], ppidField, startField)
	if n < startField {
		return Stat{}, fmt.Errorf("stat: %d fields after comm, need %d", n-2, startField-2)
	}
	ppid, err := strconv.Atoi(string(ppidText))
	if err != nil {
		return Stat{}, fmt.Errorf("stat: parent %q: %w", excerpt(ppidText), err)
	}
	start, err := strconv.ParseUint(string(startText), 10, 64)
	if err != nil {
		return Stat{}, fmt.Errorf("stat: start time %q: %w", excerpt(startText), err)
	}
	return Stat{Comm: string(b[open+1 : close]), PPID: ppid, StartTime: start}, nil
}

// statBuf holds a whole stat line: 52 fields of at most 20 digits and a
// comm of at most 15 bytes fit with room to spare.
const statBuf = 1280

// fieldsAt returns fields a and b (a < b) of what follows the comm's ')',
// numbering as proc(5) does, so the first field after it is 3, and the
// number of the last field present. Fields are separated by runs of
// spaces, tabs and newlines, as strings.Fields would split them.
func fieldsAt(rest []byte, a, b int) (fa, fb []byte, last int) {
	field := 2
	for i := 0; i < len(rest); {
		for i < len(rest) && isSpace(rest[i]) {
			i++
		}
		if i == len(rest) {
			break
		}
		j := i
		for j < len(rest) && !isSpace(rest[j]) {
			j++
		}
		field++
		switch field {
		case a:
			fa = rest[i:j]
		case b:
			fb = rest[i:j]
		}
		i = j
	}
	return fa, fb, field
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// excerpt is what an error quotes of a line, copied: the line itself must
// not escape into the error, or every caller's buffer would move to the
// heap (ReadStat's, read for each member of a stop, among them).
func excerpt(b []byte) string {
	if len(b) > 64 {
		b = b[:64]
	}
	return string(b)
}
