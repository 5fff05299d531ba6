package scopes

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// ErrCgroupAbsent marks a cgroup that is missing or unreadable. It is an
// absent observation, never an empty one: a stop that meets it ends
// uncertain.
var ErrCgroupAbsent = errors.New("cgroup absent or unreadable (absent is not empty)")

// cgroupFS is a handle on the cgroup2 mount. Every file is opened beneath
// it with openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_XDEV), so a
// path from systemd or /proc can never lead outside the cgroup2 tree, and
// the mount was checked to be cgroup2 with fstatfs (as in
// opencontainers/cgroups file.go).
type cgroupFS struct {
	mount string
	fd    int // O_PATH directory fd of the mount

	mu       sync.Mutex
	granted  []grantNote // accesses grantOwner restored, for the stops' notes
	unlisted int         // restored accesses past maxGrantNotes paths
}

// findCgroup2Mount returns the cgroup2 mount point of this process's
// mountinfo (cgroup2Mount).
func findCgroup2Mount() (string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	return cgroup2Mount(string(b))
}

// cgroup2Mount returns the cgroup2 mount point of mountinfo, unescaped,
// preferring /sys/fs/cgroup (a pure cgroup2 host, or the test sandbox)
// over any other (/sys/fs/cgroup/unified on a hybrid host).
func cgroup2Mount(mountinfo string) (string, error) {
	first := ""
	for m := range mountEntries(mountinfo) {
		switch {
		case m.fstype != "cgroup2":
		case m.point == "/sys/fs/cgroup":
			return m.point, nil
		case first == "":
			first = m.point
		}
	}
	if first == "" {
		return "", errors.New("no cgroup2 mount in /proc/self/mountinfo")
	}
	return first, nil
}

func openCgroupFS(mount string) (*cgroupFS, error) {
	if mount == "" {
		m, err := findCgroup2Mount()
		if err != nil {
			return nil, err
		}
		mount = m
	}
	fd, err := unix.Open(mount, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open cgroup2 mount %s: %w", mount, err)
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("fstatfs %s: %w", mount, err)
	}
	if st.Type != unix.CGROUP2_SUPER_MAGIC {
		unix.Close(fd)
		return nil, fmt.Errorf("%s is not cgroup2 (fs magic %#x)", mount, st.Type)
	}
	return &cgroupFS{mount: mount, fd: fd}, nil
}

func (c *cgroupFS) close() {
	if c != nil && c.fd >= 0 {
		unix.Close(c.fd)
		c.fd = -1
	}
}

// rel turns a cgroup path ("/user.slice/…") into one relative to the mount.
func rel(cgroup, name string) string {
	p := strings.TrimPrefix(path.Join(cgroup, name), "/")
	if p == "" {
		return "."
	}
	return p
}

// open opens cgroup/name beneath the mount. ENOENT and ENODEV (a removed
// cgroup) are wrapped in ErrCgroupAbsent.
func (c *cgroupFS) open(cgroup, name string, flags uint64) (int, error) {
	return c.openAt(c.fd, "/", rel(cgroup, name), flags)
}

// openAt opens p beneath the directory dirfd, the cgroup dir (its path
// below the mount, for errors and notes), as open does. A walk down a
// cgroup tree opens each cgroup from its parent's descriptor: a tool can
// nest cgroups until a path from the mount is longer than PATH_MAX, and
// no open by the whole path could then reach the deepest.
func (c *cgroupFS) openAt(dirfd int, dir, p string, flags uint64) (int, error) {
	how := unix.OpenHow{
		Flags:   flags | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_XDEV,
	}
	grants := 0
	for {
		fd, err := unix.Openat2(dirfd, p, &how)
		if err == unix.ENOSYS {
			// A seccomp filter that predates openat2 answers ENOSYS (systemd
			// does so for every syscall its libseccomp does not know, and
			// mosaic-conv@.service's hardening installs one). Fall back to
			// openat on a path that cannot climb out of the mount; cgroupfs
			// holds no symlinks, and O_NOFOLLOW refuses one at the end.
			fd, err = openBeneath(dirfd, p, int(how.Flags))
		}
		if err == unix.EINTR || err == unix.EAGAIN {
			continue
		}
		if isDenied(err) && grants < maxGrants {
			// A tool took the owner's access away (grant.go): give it
			// back and open again.
			grants++
			gerr := c.grantOwner(dirfd, dir, p, how.Flags)
			if gerr == nil {
				continue
			}
			err = fmt.Errorf("%w (restoring access: %w)", err, gerr)
		}
		if err != nil {
			return -1, classify(path.Join(c.mount, dir, p), "open", err)
		}
		return fd, nil
	}
}

// openBeneath is the openat fallback of open: p must be relative and free
// of "..", so it stays beneath dirfd.
func openBeneath(dirfd int, p string, flags int) (int, error) {
	if path.IsAbs(p) || p != path.Clean(p) || p == ".." || strings.HasPrefix(p, "../") || strings.Contains(p, "/../") {
		return -1, unix.EINVAL
	}
	return unix.Openat(dirfd, p, flags|unix.O_NOFOLLOW, 0)
}

func classify(p, op string, err error) error {
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("%s %s: %w: %w", op, p, ErrCgroupAbsent, err)
	}
	return &os.PathError{Op: op, Path: p, Err: err}
}

func (c *cgroupFS) read(cgroup, name string) ([]byte, error) {
	return c.readAt(c.fd, "/", rel(cgroup, name))
}

// readAt reads p beneath the directory dirfd, the cgroup dir (openAt).
func (c *cgroupFS) readAt(dirfd int, dir, p string) ([]byte, error) {
	fd, err := c.openAt(dirfd, dir, p, unix.O_RDONLY)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, classify(path.Join(c.mount, dir, p), "read", err)
	}
	return b, nil
}

func (c *cgroupFS) write(cgroup, name, data string) error {
	fd, err := c.open(cgroup, name, unix.O_WRONLY)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if _, err := unix.Write(fd, []byte(data)); err != nil {
		return classify(path.Join(c.mount, cgroup, name), "write", err)
	}
	return nil
}

// mkdir creates cgroup/name (one level).
func (c *cgroupFS) mkdir(cgroup, name string) error {
	fd, err := c.open(cgroup, "", unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Mkdirat(fd, name, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
		return &os.PathError{Op: "mkdir", Path: path.Join(c.mount, cgroup, name), Err: err}
	}
	return nil
}

// cgEvents is cgroup.events.
type cgEvents struct {
	Populated int
	Frozen    int
}

func parseEvents(b []byte) (cgEvents, error) {
	ev := cgEvents{Populated: -1, Frozen: -1}
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return ev, fmt.Errorf("cgroup.events: %q: %w", line, err)
		}
		switch k {
		case "populated":
			ev.Populated = n
		case "frozen":
			ev.Frozen = n
		}
	}
	if ev.Populated < 0 {
		return ev, fmt.Errorf("cgroup.events without populated: %q", b)
	}
	return ev, nil
}

func (c *cgroupFS) events(cgroup string) (cgEvents, error) {
	b, err := c.read(cgroup, "cgroup.events")
	if err != nil {
		return cgEvents{}, err
	}
	return parseEvents(b)
}

// procs enumerates the processes of cgroup and every cgroup below it. Any
// error (including a sub-cgroup that vanished mid-walk) makes the
// enumeration incomplete and is returned.
func (c *cgroupFS) procs(cgroup string) ([]int, error) {
	fd, err := c.open(cgroup, "", unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	return c.procsBelow(fd, cgroup, true)
}

// procsBelow is procs of the cgroup whose directory is dirfd; top says it
// is where the walk began. Each sub-cgroup is opened from its parent's
// descriptor (openAt), never by its whole path. A threaded cgroup below
// it (a tool can make one: it owns the engine cgroup) refuses to list
// processes (EOPNOTSUPP): every process with a thread anywhere in a
// threaded subtree is listed by the subtree's threaded domain, a cgroup
// above it that the walk read first, and no cgroup below a threaded one
// holds a process of its own. Such a subtree is skipped; at the top the
// refusal stands, since the domain would be outside the walk.
func (c *cgroupFS) procsBelow(dirfd int, cgroup string, top bool) ([]int, error) {
	b, err := c.readAt(dirfd, cgroup, "cgroup.procs")
	if err != nil && !top && errors.Is(err, unix.EOPNOTSUPP) && c.threaded(dirfd, cgroup) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var pids []int
	for f := range strings.FieldsSeq(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("cgroup.procs of %s: %q: %w", cgroup, f, err)
		}
		pids = append(pids, pid)
	}
	names, err := c.subgroups(dirfd, cgroup)
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		sub, err := c.procsOf(dirfd, cgroup, name)
		if err != nil {
			return nil, err
		}
		pids = append(pids, sub...)
	}
	return pids, nil
}

// procsOf is procsBelow of the sub-cgroup name of the cgroup at dirfd.
func (c *cgroupFS) procsOf(dirfd int, cgroup, name string) ([]int, error) {
	fd, err := c.openAt(dirfd, cgroup, name, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	return c.procsBelow(fd, path.Join(cgroup, name), false)
}

// subgroups lists the sub-cgroups of the cgroup whose directory is dirfd,
// read through a duplicate of it (dirfd stays open for the walk).
func (c *cgroupFS) subgroups(dirfd int, cgroup string) ([]string, error) {
	dup, err := unix.FcntlInt(uintptr(dirfd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, classify(path.Join(c.mount, cgroup), "dup", err)
	}
	dir := os.NewFile(uintptr(dup), cgroup)
	ents, err := dir.ReadDir(-1)
	dir.Close()
	if err != nil {
		return nil, classify(path.Join(c.mount, cgroup), "readdir", err)
	}
	var names []string
	for _, e := range ents {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// threaded says whether the cgroup.type of the cgroup at dirfd reads
// "threaded".
func (c *cgroupFS) threaded(dirfd int, cgroup string) bool {
	b, err := c.readAt(dirfd, cgroup, "cgroup.type")
	return err == nil && strings.TrimSpace(string(b)) == "threaded"
}

// waitEvents reads cgroup.events until cond holds or the deadline passes,
// reading before it waits and sleeping between reads in poll(2) on the
// file itself, opened beneath the mount. kernfs wakes a poller with
// POLLPRI on every change of the file (cgroup_file_notify, then
// kernfs_notify) directly, where an inotify watch is told through a
// workqueue, and closing an inotify instance waits for an SRCU grace
// period (fsnotify_destroy_group): milliseconds on a loaded machine, paid
// by every wait, even one whose first read already satisfied it. It
// returns the last events read; an error means the file could not be read
// (absent).
func (c *cgroupFS) waitEvents(cgroup string, deadline time.Time, cond func(cgEvents) bool) (cgEvents, bool, error) {
	fd, err := c.open(cgroup, "cgroup.events", unix.O_RDONLY)
	if err != nil {
		return cgEvents{}, false, err
	}
	defer unix.Close(fd)
	p := path.Join(c.mount, cgroup, "cgroup.events")
	buf := make([]byte, 512)
	wait := time.Millisecond
	for {
		// A read at offset 0 restarts the seq file, and re-arms POLLPRI
		// (kernfs notes the event count it showed).
		n, err := unix.Pread(fd, buf, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return cgEvents{}, false, classify(p, "read", err)
		}
		ev, err := parseEvents(buf[:n])
		if err != nil {
			return ev, false, err
		}
		if cond(ev) {
			return ev, true, nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return ev, false, nil
		}
		// Re-read after 1 ms, then twice as long each time up to 50 ms:
		// the kernel rate-limits cgroup.events notifications (one per
		// 10 ms per file, the rest deferred to a timer), so a change
		// right after another (frozen, then populated 0) is only read
		// on time; and a missed one, or a removal, must not stall us.
		ms := min(left, wait).Milliseconds() + 1
		wait = min(2*wait, 50*time.Millisecond)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLPRI}}
		if _, err := unix.Poll(fds, int(ms)); err != nil && err != unix.EINTR {
			return ev, false, fmt.Errorf("poll %s: %w", p, err)
		}
	}
}
