package scopes

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"
)

// readOnlyPaths checks Spec.ReadOnly and Spec.Writable: every path
// absolute and clean once cleaned, and each writable file below a
// read-only path (one that is not would be writable anyway: refused, so
// a caller that named the wrong directory hears of it).
func readOnlyPaths(ro, writable []string) ([]string, []string, error) {
	var rs, ws maskSet
	for _, p := range ro {
		if !filepath.IsAbs(p) {
			return nil, nil, fmt.Errorf("%w: read-only path %q is not absolute", ErrConfinement, p)
		}
		rs.add(p)
	}
	for _, w := range writable {
		if !filepath.IsAbs(w) {
			return nil, nil, fmt.Errorf("%w: writable path %q is not absolute", ErrConfinement, w)
		}
		w = filepath.Clean(w)
		if !slices.ContainsFunc(rs, func(r string) bool { return below(r, w) }) {
			return nil, nil, fmt.Errorf("%w: writable path %s is under no read-only path", ErrConfinement, w)
		}
		ws.add(w)
	}
	return rs, ws, nil
}

// readOnly binds p onto itself and makes that bind read-only: the engine
// reads p, and can neither write, create, remove nor rename anything in
// it, nor replace p itself (a mount point: EBUSY; fixAncestors keeps its
// parents in place). The remount keeps the flags the mount under p was
// made with: in the engine's user namespace those are locked, and a
// remount that would clear one is refused (EPERM).
func readOnly(p string) error {
	if err := unix.Mount(p, p, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return err
	}
	var st unix.Statfs_t
	if err := unix.Statfs(p, &st); err != nil {
		return err
	}
	return unix.Mount("", p, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|lockedFlags(int64(st.Flags)), "")
}

// lockedFlags are the mount flags of statfs's f_flags that a remount in
// a user namespace must repeat (the kernel's MNT_LOCK_* set: nosuid,
// nodev, noexec and the atime mode).
func lockedFlags(f int64) uintptr {
	var out uintptr
	for _, m := range [][2]uintptr{
		{unix.ST_NOSUID, unix.MS_NOSUID}, {unix.ST_NODEV, unix.MS_NODEV}, {unix.ST_NOEXEC, unix.MS_NOEXEC},
		{unix.ST_NOATIME, unix.MS_NOATIME}, {unix.ST_NODIRATIME, unix.MS_NODIRATIME}, {unix.ST_RELATIME, unix.MS_RELATIME},
	} {
		if uintptr(f)&m[0] != 0 {
			out |= m[1]
		}
	}
	if uintptr(f)&(unix.ST_NOATIME|unix.ST_RELATIME) == 0 {
		out |= unix.MS_STRICTATIME
	}
	return out
}

// writableFile is a Spec.Writable file or directory opened (O_PATH)
// before the read-only bind above it: its magic link then still names it
// on the writable mount it was on.
type writableFile struct {
	real string
	fd   int
}

type writableSet []writableFile

// openWritable opens each writable path that exists and is no link, its
// directory's links resolved as the read-only paths are; one missing is
// left out (there is nothing to bind back, and nothing can be made under
// the read-only bind). Only a path the read-only bind took away is bound
// back, and never one that is, holds or lies below another read-only or
// a masked or private path. A link at the path itself is not followed:
// one to a dotfiles tree outside every read-only directory is written
// through as it is, and one planted there (by an engine launched before
// the directory was read-only) must not make another conversation's
// models.json writable, or reopen a hidden directory over its mask.
func openWritable(paths, ro, covered []string) (writableSet, error) {
	roReal, covReal := realPaths(ro), realPaths(covered)
	var ws writableSet
	for _, p := range paths {
		if fi, err := os.Lstat(p); err != nil || fi.Mode()&os.ModeSymlink != 0 {
			continue
		}
		dir, err := filepath.EvalSymlinks(filepath.Dir(p))
		if err != nil {
			continue
		}
		real := filepath.Join(dir, filepath.Base(p))
		overlaps := func(c string) bool { return c == real || below(c, real) || below(real, c) }
		if !slices.ContainsFunc(roReal, func(r string) bool { return below(r, real) }) ||
			slices.ContainsFunc(roReal, func(r string) bool { return r == real || below(real, r) }) ||
			slices.ContainsFunc(covReal, overlaps) {
			continue
		}
		fd, err := unix.Open(real, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			ws.close()
			return nil, fmt.Errorf("writable path %s: %w", real, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT == unix.S_IFLNK {
			unix.Close(fd) // made a link since the Lstat: not followed
			continue
		}
		ws = append(ws, writableFile{real: real, fd: fd})
	}
	return ws, nil
}

// realPaths resolves each path that exists.
func realPaths(paths []string) []string {
	var out []string
	for _, p := range paths {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			out = append(out, real)
		}
	}
	return out
}

func (ws writableSet) close() {
	for _, w := range ws {
		unix.Close(w.fd)
	}
}

// bindBack binds each writable path back at its own path, from the
// mount it was opened on (recursively: what is mounted below stays).
func (ws writableSet) bindBack() error {
	for _, w := range ws {
		if err := bindFD(w.fd, w.real); err != nil {
			return fmt.Errorf("bind %s back writable: %w", w.real, err)
		}
	}
	return nil
}

// unlinked leaves out of the report each read-only path reached through
// a symbolic link the user could replace (~/.pi linked into a dotfiles
// tree): the bind holds the file the link led to at the launch, but a
// tool can point the link elsewhere, and the next conversation follows
// it there, so the proof does not call the path read-only (mosaicctl
// doctor names the link).
func unlinked(paths []string) []string {
	var out []string
	for _, p := range paths {
		if len(ReplaceableLinks(p)) == 0 {
			out = append(out, p)
		}
	}
	return out
}
