package scopes

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// keptDirs checks Spec.Keep against Spec.Hide: each kept directory is
// absolute and exists as a directory; one under no hidden directory is
// reachable anyway and left out. A kept directory that is missing is
// refused rather than made: it is the engine's own state, which its owner
// prepares, and binding an empty directory back would hide that the
// caller named the wrong one.
func keptDirs(hide, keep []string) ([]string, error) {
	var out []string
	for _, k := range keep {
		if !filepath.IsAbs(k) {
			return nil, fmt.Errorf("%w: kept directory %q is not absolute", ErrConfinement, k)
		}
		k = filepath.Clean(k)
		under := false
		for _, h := range hide {
			if rel, err := filepath.Rel(filepath.Clean(h), k); err == nil && rel != "." && !strings.HasPrefix(rel, "..") {
				under = true
			}
		}
		if st, err := os.Stat(k); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("%w: kept directory %s: not a directory (%v)", ErrConfinement, k, err)
		}
		if under {
			out = append(out, k)
		}
	}
	return out, nil
}

// keptDir is a kept directory opened (O_PATH) before any mask covers it:
// after the mask its path names the empty tmpfs, so the fd is the only way
// back to it.
type keptDir struct {
	real  string // symlinks resolved, as the masks are
	fd    int
	bound bool
}

type keptSet []*keptDir

// openKept opens every kept directory, symlinks resolved at open time so
// the fd and the path compared with the masks name the same directory.
func openKept(keep []string) (keptSet, error) {
	var ks keptSet
	for _, k := range keep {
		real, err := filepath.EvalSymlinks(k)
		if err != nil {
			ks.close()
			return nil, fmt.Errorf("kept directory %s: %w", k, err)
		}
		fd, err := unix.Open(real, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			ks.close()
			return nil, fmt.Errorf("kept directory %s: %w", real, err)
		}
		ks = append(ks, &keptDir{real: real, fd: fd})
	}
	return ks, nil
}

func (ks keptSet) close() {
	for _, k := range ks {
		unix.Close(k.fd)
	}
}

// unbound lists the kept directories no mask covered.
func (ks keptSet) unbound() []string {
	var out []string
	for _, k := range ks {
		if !k.bound {
			out = append(out, k.real)
		}
	}
	return out
}

// maskKeeping masks dir like mask, except that the kept directories under
// it are bound back at their own paths: the tmpfs is made writable just
// long enough to hold their mount points, then read-only, so the engine
// sees dir holding nothing but the path to its own directory.
func (ks keptSet) maskKeeping(dir string) error {
	var under []*keptDir
	inodes := 1
	for _, k := range ks {
		if rel, err := filepath.Rel(dir, k.real); err == nil && rel != "." && !strings.HasPrefix(rel, "..") {
			under = append(under, k)
			inodes += strings.Count(rel, "/") + 1
		}
	}
	if len(under) == 0 {
		return mask(dir)
	}
	opts := "size=4k,nr_inodes=" + strconv.Itoa(inodes) + ",mode=0700"
	const flags = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
	if err := unix.Mount("mosaic-mask", dir, "tmpfs", flags, opts); err != nil {
		return err
	}
	for _, k := range under {
		if err := os.MkdirAll(k.real, 0o700); err != nil {
			return fmt.Errorf("mount point for %s: %w", k.real, err)
		}
		// The fd's magic link names the directory as it was before the
		// mask; the bind keeps its own mount's flags.
		if err := unix.Mount("/proc/self/fd/"+strconv.Itoa(k.fd), k.real, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s back: %w", k.real, err)
		}
		k.bound = true
	}
	return unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_RDONLY|flags, "")
}
