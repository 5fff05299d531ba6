package scopes

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"

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
	return unix.Mount("", p, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|lockedFlags(st.Flags), "")
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
// before the read-only bind above it: its magic link then still names it on the
// writable mount it was on.
type writableFile struct {
	real string
	fd   int
}

type writableSet []writableFile

// openWritable opens each writable path that exists, symlinks resolved
// as the read-only paths are; one missing is left out (there is nothing
// to bind back, and nothing can be made under the read-only bind). Only a
// path the read-only bind took away is bound back: one that resolves
// outside every read-only directory (a link to a dotfiles tree) was never
// covered and is written through the link as it is, and one that is, or
// lies above or below, a path a mask or a private directory covers is
// never bound back, so a link planted at auth.json or sessions (by an
// engine launched before its directory was read-only) cannot reopen a
// hidden directory writable over its mask.
func openWritable(paths, ro, covered []string) (writableSet, error) {
	roReal, covReal := realPaths(ro), realPaths(covered)
	var ws writableSet
	for _, p := range paths {
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			continue
		}
		if !slices.ContainsFunc(roReal, func(r string) bool { return below(r, real) }) ||
			slices.ContainsFunc(covReal, func(c string) bool { return c == real || below(c, real) || below(real, c) }) {
			continue
		}
		fd, err := unix.Open(real, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			ws.close()
			return nil, fmt.Errorf("writable file %s: %w", real, err)
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
		if err := unix.Mount("/proc/self/fd/"+strconv.Itoa(w.fd), w.real, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s back writable: %w", w.real, err)
		}
	}
	return nil
}
