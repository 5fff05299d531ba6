package procfs

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
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
	b, err := read(pid, "stat")
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
		return Stat{}, fmt.Errorf("stat: no (comm): %q", truncate(b))
	}
	// Fields after the comm start at field 3 (state).
	rest := strings.Fields(string(b[close+1:]))
	const first, ppidField, startField = 3, 4, 22
	if len(rest) <= startField-first {
		return Stat{}, fmt.Errorf("stat: %d fields after comm, need %d", len(rest), startField-first+1)
	}
	ppid, err := strconv.Atoi(rest[ppidField-first])
	if err != nil {
		return Stat{}, fmt.Errorf("stat: parent %q: %w", rest[ppidField-first], err)
	}
	start, err := strconv.ParseUint(rest[startField-first], 10, 64)
	if err != nil {
		return Stat{}, fmt.Errorf("stat: start time %q: %w", rest[startField-first], err)
	}
	return Stat{Comm: string(b[open+1 : close]), PPID: ppid, StartTime: start}, nil
}

func truncate(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}
