// Package procfs reads the few things mosaic needs from /proc: the boot
// id, a process's start time, command name and parent from
// /proc/<pid>/stat, its cgroup from /proc/<pid>/cgroup, its namespaces from
// /proc/<pid>/ns, its pids in nested pid namespaces from
// /proc/<pid>/status, and the clocks the start times count in.
//
// Each of these decides an identity (a writer claim, a cohort member, a
// peer that may control), so each is parsed in one place: the command name
// is chosen by the process and may hold spaces and parentheses, and a read
// that races the process's exit must read as "gone", never as a parse
// error or as another process.
//
// Alternatives weighed: github.com/prometheus/procfs parses all of /proc
// into large structs and would pull a dependency for five fields;
// opencontainers/cgroups keeps its /proc readers as small unexported files
// per package, which is what this package does once for the module.
//
// A pid of Self (0) reads /proc/self, this process as the mounted /proc
// sees it.
package procfs
