package procfs

import (
	"fmt"
	"strings"
)

// Cgroup2 returns the cgroup2 path of pid (the "0::" line of
// /proc/<pid>/cgroup), as seen from this process's cgroup namespace.
func Cgroup2(pid int) (string, error) {
	b, err := read(pid, "cgroup")
	if err != nil {
		return "", err
	}
	return ParseCgroup2(b)
}

// ParseCgroup2 returns the path of the "0::" line.
func ParseCgroup2(b []byte) (string, error) {
	for line := range strings.SplitSeq(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p, nil
		}
	}
	return "", fmt.Errorf("no cgroup2 (0::) line in /proc/<pid>/cgroup")
}

// Cgroups returns every cgroup path of pid, one per hierarchy line (a
// hybrid host lists v1 hierarchies before the v2 line).
func Cgroups(pid int) ([]string, error) {
	paths, _, err := CgroupPaths(pid)
	return paths, err
}

// CgroupPaths is Cgroups and, from the same read, the cgroup2 path (the
// "0::" line; "" where there is none).
func CgroupPaths(pid int) (paths []string, unified string, err error) {
	b, err := read(pid, "cgroup")
	if err != nil {
		return nil, "", err
	}
	paths = ParseCgroups(b)
	if len(paths) == 0 {
		return nil, "", fmt.Errorf("%s names no cgroup", Path(pid, "cgroup"))
	}
	unified, _ = ParseCgroup2(b)
	return paths, unified, nil
}

// ParseCgroups returns the path of every hierarchy-ID:controllers:path
// line; the path may itself contain ':'.
func ParseCgroups(b []byte) []string {
	var paths []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if parts := strings.SplitN(line, ":", 3); len(parts) == 3 {
			paths = append(paths, parts[2])
		}
	}
	return paths
}
