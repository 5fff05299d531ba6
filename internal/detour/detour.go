// Package detour finds what on a path could carry an open, a mask or a
// bind somewhere else: a symlink on it, or a file where a directory
// should be. Conversations refuse such paths for their project and
// session directory; the controller leaves an env file behind one
// unmasked, since a mask there would land where the link leads.
//
// Find is a walk of lstat calls, one per component, not a resolution: the
// answer is about the path as it stands now, and a caller that opens the
// path later must open it without following links (Open) if the answer is
// to hold.
package detour

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Detour is the first component of a path that leads elsewhere.
type Detour struct {
	At   string // the component, as a path
	Link bool   // a symlink; otherwise a non-directory before the last component
}

// String names the component and what it is ("" for none).
func (d Detour) String() string {
	switch {
	case d.At == "":
		return ""
	case d.Link:
		return d.At + " is a symlink"
	}
	return d.At + " is not a directory"
}

// Find returns the first component of path, as far as it exists, that is
// a symlink or, before the last, not a directory; the zero Detour when
// there is none. A component that does not exist ends the walk with no
// detour (the caller's own open or stat names what is missing); any other
// lstat error is returned, naming the component.
func Find(path string) (Detour, error) {
	cur := "/"
	if !filepath.IsAbs(path) {
		cur = "."
	}
	parts := strings.FieldsFunc(path, func(r rune) bool { return r == '/' })
	for i, part := range parts {
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return Detour{}, nil
		case err != nil:
			return Detour{}, err
		case fi.Mode()&fs.ModeSymlink != 0:
			return Detour{At: cur, Link: true}, nil
		case i < len(parts)-1 && !fi.IsDir():
			return Detour{At: cur}, nil
		}
	}
	return Detour{}, nil
}

// Open opens path following no symlink anywhere on it, as
// openat2(RESOLVE_NO_SYMLINKS) would: each directory is opened from the one
// before it with O_NOFOLLOW, so no link is followed between the check and
// the open. Not openat2 itself: mosaic-conv@.service's seccomp filter
// answers it ENOSYS. A link on the way is ELOOP.
func Open(path string, flags int) (int, error) {
	dir := unix.AT_FDCWD
	if filepath.IsAbs(path) {
		fd, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, err
		}
		dir = fd
	}
	defer func() {
		if dir != unix.AT_FDCWD {
			unix.Close(dir)
		}
	}()
	parts := strings.FieldsFunc(path, func(r rune) bool { return r == '/' })
	if len(parts) == 0 {
		return -1, unix.EISDIR
	}
	for _, part := range parts[:len(parts)-1] {
		fd, err := unix.Openat(dir, part, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == unix.ENOTDIR {
			// O_PATH opens a link itself, and O_DIRECTORY then refuses it.
			var st unix.Stat_t
			if unix.Fstatat(dir, part, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
				err = unix.ELOOP
			}
		}
		if err != nil {
			return -1, err
		}
		if dir != unix.AT_FDCWD {
			unix.Close(dir)
		}
		dir = fd
	}
	return unix.Openat(dir, parts[len(parts)-1], flags|unix.O_NOFOLLOW, 0)
}
