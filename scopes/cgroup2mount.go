package scopes

// Cgroup2Mount returns the cgroup2 mount point this package uses:
// /sys/fs/cgroup on a pure cgroup2 host, /sys/fs/cgroup/unified on a
// hybrid one (mosaicctl doctor reports which).
func Cgroup2Mount() (string, error) { return findCgroup2Mount() }
