package scopes

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// A tool owns the engine cgroup and every cgroup it makes below it (same
// uid, delegated), so it can chmod their directories and files to 000:
// every read of cgroup.procs or cgroup.events and every write of
// cgroup.kill would then fail with EACCES and every stop end uncertain,
// for good. The controller runs as the same uid and owns them as well: an
// open refused EACCES gives the owner back the access it needs and is
// made again (up to maxGrants times), and the cohort's stop notes each
// path it had to restore. During the kill phase the cohort is frozen, so
// the access stays given.

// maxGrants bounds how often one open restores access. A frozen cohort
// cannot take it away again; a running one (the TERM phase, the moment
// before the freeze takes) can, in a loop, and then the open fails.
const maxGrants = 3

// grantOwner adds to each component of p (a path relative to the
// directory dirfd, the cgroup dir: the mount's, "/", or one a walk
// opened) the owner's permission an open of p with flags needs: search on
// dirfd and every directory, and on p itself read or write as flags ask
// (read and search for a directory opened to be read). It changes nothing
// already allowed.
func (c *cgroupFS) grantOwner(dirfd int, dir, p string, flags uint64) error {
	if p == "." || path.IsAbs(p) || p != path.Clean(p) || p == ".." || strings.HasPrefix(p, "../") || strings.Contains(p, "/../") {
		return fmt.Errorf("grant access to %q: not a clean path beneath %s", p, dir)
	}
	if dirfd != c.fd {
		if err := c.grantSearch(dirfd, dir); err != nil {
			return err
		}
	}
	parts := strings.Split(p, "/")
	for i := range parts {
		sub := strings.Join(parts[:i+1], "/")
		var st unix.Stat_t
		if err := unix.Fstatat(dirfd, sub, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return classify(path.Join(c.mount, dir, sub), "stat", err)
		}
		need := uint32(unix.S_IXUSR)
		if i == len(parts)-1 {
			need = ownerNeeds(st.Mode, flags)
		} else if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return fmt.Errorf("grant access to %s: %s is not a directory", path.Join(c.mount, dir, p), sub)
		}
		if st.Mode&need == need {
			continue
		}
		mode := st.Mode&0o7777 | need
		if err := unix.Fchmodat(dirfd, sub, mode, 0); err != nil {
			return classify(path.Join(c.mount, dir, sub), "chmod", err)
		}
		c.noteGranted(fmt.Sprintf("%s was mode %04o: owner access restored (%04o)", path.Join(dir, sub), st.Mode&0o7777, mode))
	}
	return nil
}

// grantSearch gives the owner search on the directory a walk holds open
// (dirfd), which a tool may have taken away after the walk opened it.
func (c *cgroupFS) grantSearch(dirfd int, dir string) error {
	var st unix.Stat_t
	if err := unix.Fstat(dirfd, &st); err != nil {
		return classify(path.Join(c.mount, dir), "stat", err)
	}
	if st.Mode&unix.S_IXUSR != 0 {
		return nil
	}
	mode := st.Mode&0o7777 | unix.S_IXUSR
	if err := unix.Fchmod(dirfd, mode); err != nil {
		return classify(path.Join(c.mount, dir), "chmod", err)
	}
	c.noteGranted(fmt.Sprintf("%s was mode %04o: owner access restored (%04o)", dir, st.Mode&0o7777, mode))
	return nil
}

// ownerNeeds is the owner's permission an open with flags needs on a file
// or directory of mode.
func ownerNeeds(mode uint32, flags uint64) uint32 {
	if flags&unix.O_PATH != 0 {
		return 0
	}
	var need uint32
	switch flags & unix.O_ACCMODE {
	case unix.O_RDONLY:
		need = unix.S_IRUSR
	case unix.O_WRONLY:
		need = unix.S_IWUSR
	default:
		need = unix.S_IRUSR | unix.S_IWUSR
	}
	if mode&unix.S_IFMT == unix.S_IFDIR {
		need |= unix.S_IXUSR
	}
	return need
}

// noteGranted records a restored access for the stop of the cohort it
// lies in (takeGranted).
func (c *cgroupFS) noteGranted(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.granted = append(c.granted, s)
}

// takeGranted returns and forgets the restored accesses at or below
// cgroup.
func (c *cgroupFS) takeGranted(cgroup string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var mine, rest []string
	for _, g := range c.granted {
		if g == cgroup || strings.HasPrefix(g, cgroup+"/") || strings.HasPrefix(g, cgroup+" ") {
			mine = append(mine, g)
		} else {
			rest = append(rest, g)
		}
	}
	c.granted = rest
	return mine
}

// isDenied says whether err is a refusal for lack of permission.
func isDenied(err error) bool { return errors.Is(err, unix.EACCES) }
