package scopes

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// fixAncestors makes every directory above the paths the confinement
// covers a mount point of the engine's mount namespace, where the user
// could rename it: a bind of itself onto itself (recursive, so what is
// mounted below stays). A mask stops a tool from reaching a path, not
// from renaming one of its parents: mv ~/.local/state ~/.local/state.x,
// then a fresh ~/.local/state/mosaic/… of the tool's own making, and the
// controller outside reads forged claims, queue items or settings at the
// paths it knows, and the user manager a forged unit. rename(2) of a
// mount point of the caller's namespace fails (EBUSY), so every ancestor
// that could move stays where it is. An ancestor the user cannot rename
// (its parent neither writable nor the user's: /, /home, /run/user) is
// left alone. Runs before anything is mounted over paths, so each bind
// is of the real directory.
func fixAncestors(paths ...[]string) error {
	var dirs []string
	for _, list := range paths {
		for _, p := range list {
			real, err := filepath.EvalSymlinks(p)
			if errors.Is(err, fs.ErrNotExist) {
				continue // absent: its mask notes it, nothing to keep in place
			}
			if err != nil {
				return fmt.Errorf("keep the parents of %s in place: %w", p, err)
			}
			for d := filepath.Dir(real); d != "/" && d != "."; d = filepath.Dir(d) {
				if !slices.Contains(dirs, d) {
					dirs = append(dirs, d)
				}
			}
		}
	}
	// Parents first, so a child's bind is made inside its parent's.
	slices.SortFunc(dirs, func(a, b string) int { return strings.Count(a, "/") - strings.Count(b, "/") })
	for _, d := range dirs {
		if !movable(d) {
			continue
		}
		if err := unix.Mount(d, d, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("keep %s in place: %w", d, err)
		}
	}
	return nil
}

// movable says whether the user could rename d: its parent is theirs to
// change (userCanChange).
func movable(d string) bool { return userCanChange(filepath.Dir(d)) }

// userCanChange says whether the user can add, rename or remove entries
// of dir: it is writable to them, or theirs (a directory of mode 0555
// that the user owns is one chmod away from writable), unless it is on a
// read-only mount (where chmod fails too: a link inside an input bound
// read-only stays where it leads).
func userCanChange(dir string) bool {
	if unix.Access(dir, unix.W_OK) == nil {
		return true
	}
	var fs unix.Statfs_t
	if unix.Statfs(dir, &fs) == nil && fs.Flags&unix.ST_RDONLY != 0 {
		return false
	}
	var st unix.Stat_t
	return unix.Stat(dir, &st) == nil && int(st.Uid) == os.Getuid()
}

// ReplaceableLinks lists the symbolic links on the way to each of paths
// (lexically, from the root down) that the user could replace: a link's
// parent writable or the user's. fixAncestors cannot keep such a link in
// place (nothing mounts on a link), so a tool can point it elsewhere and
// have a forged tree read there by the controller or the user manager
// outside: `mosaicctl doctor` names them, and a covered path that does
// not resolve through one fails the launch (cover).
func ReplaceableLinks(paths ...string) []string {
	var out []string
	for _, p := range paths {
		p = filepath.Clean(p)
		if !filepath.IsAbs(p) {
			continue
		}
		for d := p; d != "/"; d = filepath.Dir(d) {
			fi, err := os.Lstat(d)
			if err == nil && fi.Mode()&os.ModeSymlink != 0 && movable(d) && !slices.Contains(out, d) {
				out = append(out, d)
			}
		}
	}
	slices.Sort(out)
	return out
}
