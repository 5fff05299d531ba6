package scopes

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
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
		under := slices.ContainsFunc(hide, func(h string) bool { return below(filepath.Clean(h), k) })
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

// openKept opens every kept directory, symlinks resolved at open time so the
// fd and the path compared with the masks name the same file.
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

// unbound lists the kept paths no mask covered.
func (ks keptSet) unbound() []string {
	var out []string
	for _, k := range ks {
		if !k.bound {
			out = append(out, k.real)
		}
	}
	return out
}

// under lists the kept paths below dir, and how many inodes their mount
// points take in a tmpfs over dir.
func (ks keptSet) under(dir string) ([]*keptDir, int) {
	var out []*keptDir
	inodes := 0
	for _, k := range ks {
		if below(dir, k.real) {
			out = append(out, k)
			rel, _ := filepath.Rel(dir, k.real)
			inodes += strings.Count(rel, "/") + 1
		}
	}
	return out, inodes
}

// below says whether the clean path p lies strictly below dir.
func below(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, "../")
}

// maskKeeping masks dir like mask, except that the kept directories under
// it are bound back at their own paths: the tmpfs is made writable just
// long enough to hold their mount points, then read-only, so the engine
// sees dir holding nothing but the path to its own directory.
func (ks keptSet) maskKeeping(dir string) error {
	under, inodes := ks.under(dir)
	if len(under) == 0 {
		return mask(dir)
	}
	opts := "size=4k,nr_inodes=" + strconv.Itoa(inodes+1) + ",mode=0700"
	const flags = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
	if err := unix.Mount("mosaic-mask", dir, "tmpfs", flags, opts); err != nil {
		return err
	}
	if err := bindBack(under); err != nil {
		return err
	}
	return unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_RDONLY|flags, "")
}

// privateKeeping puts a fresh, writable tmpfs of the engine's own over a
// runtime directory (privateRuntime), with the kept paths under it bound
// back at their own paths.
func (ks keptSet) privateKeeping(dir string) error {
	under, _ := ks.under(dir)
	if err := privateRuntime(dir); err != nil {
		return err
	}
	return bindBack(under)
}

// bindBack binds each kept directory back at its own path, on a mount
// point made for it in the tmpfs just mounted above it.
func bindBack(kept []*keptDir) error {
	for _, k := range kept {
		if err := os.MkdirAll(k.real, 0o700); err != nil {
			return fmt.Errorf("mount point for %s: %w", k.real, err)
		}
		if err := bindFD(k.fd, k.real); err != nil {
			return fmt.Errorf("bind %s back: %w", k.real, err)
		}
		k.bound = true
	}
	return nil
}

// bindFD binds what fd, an O_PATH descriptor opened before a mount
// covered it, names at the path at, recursively: the fd's magic link
// names the path as it was before, and the bind keeps the flags of the
// mount it was opened on.
func bindFD(fd int, at string) error {
	return unix.Mount("/proc/self/fd/"+strconv.Itoa(fd), at, "", unix.MS_BIND|unix.MS_REC, "")
}
