package procfs

import (
	"fmt"
	"strconv"
	"strings"
)

// NSpid reads the NSpid line of /proc/<pid>/status: the process's pid in
// each pid namespace from this /proc's down to its own.
func NSpid(pid int) ([]int, error) {
	b, err := read(pid, "status")
	if err != nil {
		return nil, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, "NSpid:")
		if !ok {
			continue
		}
		var out []int
		for f := range strings.FieldsSeq(rest) {
			n, err := strconv.Atoi(f)
			if err != nil {
				return nil, fmt.Errorf("NSpid %q: %w", rest, err)
			}
			out = append(out, n)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%s has no NSpid line", Path(pid, "status"))
}
