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
		c.noteGranted(path.Join(dir, sub), fmt.Sprintf("%s was mode %04o: owner access restored (%04o)", path.Join(dir, sub), st.Mode&0o7777, mode))
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
	c.noteGranted(dir, fmt.Sprintf("%s was mode %04o: owner access restored (%04o)", dir, st.Mode&0o7777, mode))
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

// maxGrantNotes bounds the distinct paths whose restored access is noted
// between two kill phases: a tool that keeps chmod-ing while opens are
// made without a kill phase (a force stop's confirmation counts the
// cohort's members each time it is asked for) would otherwise grow the
// notes without end. A path restored again is counted on its note; the
// paths past the bound are counted, not listed.
const maxGrantNotes = 64

// grantNote is a restored access: the path relative to the mount, the
// note of its first restoration, and how often it was restored since.
type grantNote struct {
	path, note string
	again      int
}

// noteGranted records a restored access to p for the stop of the cohort
// it lies in (takeGranted).
func (c *cgroupFS) noteGranted(p, note string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.granted {
		if c.granted[i].path == p {
			c.granted[i].again++
			return
		}
	}
	if len(c.granted) >= maxGrantNotes {
		c.unlisted++
		return
	}
	c.granted = append(c.granted, grantNote{path: p, note: note})
}

// takeGranted returns and forgets the restored accesses at or below
// cgroup, and the count of those past the bound (which may lie anywhere).
func (c *cgroupFS) takeGranted(cgroup string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var mine []string
	var rest []grantNote
	for _, g := range c.granted {
		switch {
		case g.path != cgroup && !strings.HasPrefix(g.path, cgroup+"/"):
			rest = append(rest, g)
		case g.again > 0:
			mine = append(mine, fmt.Sprintf("%s; restored %d more time(s)", g.note, g.again))
		default:
			mine = append(mine, g.note)
		}
	}
	if c.unlisted > 0 {
		mine = append(mine, fmt.Sprintf("owner access restored on %d more path(s), not listed (the notes keep %d distinct paths)", c.unlisted, maxGrantNotes))
		c.unlisted = 0
	}
	c.granted = rest
	return mine
}

// isDenied says whether err is a refusal for lack of permission.
func isDenied(err error) bool { return errors.Is(err, unix.EACCES) }
