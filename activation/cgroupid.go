package activation

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/mosaic-agents/mosaic/internal/procfs"
	"github.com/mosaic-agents/mosaic/scopes"
)

// A cgroup v2 id is the inode number of the cgroup's directory on the
// cgroup2 filesystem. The kernel maps an id back to a cgroup only through
// open_by_handle_at(2), which needs CAP_DAC_READ_SEARCH in the initial user
// namespace (the web server has none), so cgroupPath asks the other way
// round: which path has that inode, on that filesystem's device? The inode
// alone is not enough: a hybrid host mounts cgroup v1 hierarchies and a
// tmpfs beside the v2 one, whose inode numbers collide with its ids.
//
// Walking the whole hierarchy would cost what an engine chooses: a scope
// with Delegate=yes may make thousands of sub-cgroups, and every judgement
// would walk them. So the candidates are, first, the cgroups of the live
// processes (/proc/<pid>/cgroup is readable for every process; a socket's
// maker or holder is usually still where it was made, and an engine pays
// one read per process it runs, bounded by its TasksMax), then a walk that
// skips every user manager's subtree (user@UID.service), the only part of
// the tree a user — and so an engine — can grow. A socket made in a cgroup
// of a user manager's subtree where no process is left is not found, and
// so not vouched for.

// cgroupFS is the cgroup2 mount and its device.
type cgroupFS struct {
	mount string
	dev   uint64
}

func openCgroup2() (cgroupFS, error) {
	m, err := scopes.Cgroup2Mount()
	if err != nil {
		return cgroupFS{}, fmt.Errorf("%w: find the cgroup2 mount: %w", ErrPeerUnreadable, err)
	}
	var st unix.Stat_t
	if err := unix.Stat(m, &st); err != nil {
		return cgroupFS{}, fmt.Errorf("%w: stat the cgroup2 mount %s: %w", ErrPeerUnreadable, m, err)
	}
	return cgroupFS{mount: m, dev: st.Dev}, nil
}

// cgroupDir says whether st is a directory of the cgroup2 mount: its
// inode number is then a cgroup's id. A hybrid host's v1 hierarchies and
// tmpfs reuse those numbers on other devices.
func (c cgroupFS) cgroupDir(st *unix.Stat_t) bool {
	return st.Dev == c.dev && st.Mode&unix.S_IFMT == unix.S_IFDIR
}

// look maps every cgroup a look can place to its path below the cgroup2
// mount's root (as /proc/<pid>/cgroup names it): the cgroups of the live
// processes, each distinct path stat'ed once, and every cgroup outside
// the user managers' subtrees. One look answers for every id at once, so
// ids a tool makes one after another cost no look each.
func (c cgroupFS) look() (map[uint64]string, error) {
	of := map[uint64]string{}
	c.ofProcesses(of)
	if err := c.outsideManagers(of); err != nil {
		return nil, err
	}
	return of, nil
}

// ofProcesses adds the cgroups of the live processes to of.
func (c cgroupFS) ofProcesses(of map[uint64]string) {
	d, err := os.Open("/proc")
	if err != nil {
		return
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return
	}
	seen := map[string]bool{}
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil || pid <= 0 {
			continue
		}
		cg, err := procfs.Cgroup2(pid)
		if err != nil || seen[cg] {
			continue
		}
		seen[cg] = true
		var st unix.Stat_t
		if unix.Lstat(filepath.Join(c.mount, cg), &st) == nil && c.cgroupDir(&st) {
			of[st.Ino] = cg
		}
	}
}

// outsideManagers adds every cgroup of the cgroup2 mount to of but those
// in the user managers' subtrees, or on any other filesystem mounted
// below it.
func (c cgroupFS) outsideManagers(of map[uint64]string) error {
	err := filepath.WalkDir(c.mount, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == c.mount {
				return err
			}
			return nil // removed meanwhile, or closed to us
		}
		if !d.IsDir() {
			return nil
		}
		if name := d.Name(); p != c.mount && strings.HasPrefix(name, "user@") && strings.HasSuffix(name, ".service") {
			return fs.SkipDir
		}
		var st unix.Stat_t
		if unix.Lstat(p, &st) != nil {
			return nil
		}
		if st.Dev != c.dev {
			return fs.SkipDir
		}
		if c.cgroupDir(&st) {
			rel, _ := filepath.Rel(c.mount, p)
			if rel == "." {
				rel = ""
			}
			of[st.Ino] = "/" + filepath.ToSlash(rel)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w: walk %s: %w", ErrPeerUnreadable, c.mount, err)
	}
	return nil
}
