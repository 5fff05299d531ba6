// Package owner answers one question about a file that runs outside
// every engine (the scope's anchor, the controller the units start): can
// this user, and so a confined engine of theirs, replace it? A file the
// user could replace is one a tool could rewrite for the next start to
// run, unconfined.
package owner

import (
	"os"
	"path/filepath"
	"syscall"
)

// BeyondUser says whether p resolves to an executable regular file this
// user (and so an engine of theirs) cannot replace: neither the file nor
// any directory above it is the user's own or writable by group or
// others (a sticky directory aside). Root's files qualify, and so do
// files whose owner a user namespace does not map (they show as the
// overflow uid). A root user's own files count as root's.
func BeyondUser(p string) bool {
	uid := os.Getuid()
	return program(p, func(owner int) bool { return uid == 0 || owner != uid })
}

// RootOnly says whether p resolves to an executable regular file that
// only root can replace: the file and every directory above it are
// root's and not writable by group or others (a sticky directory aside),
// whoever asks. A root caller's BeyondUser takes any user's file; what
// every user's controllers run (install --global) must be this.
func RootOnly(p string) bool {
	return program(p, func(owner int) bool { return owner == 0 })
}

// program walks p's resolved path up to /, every component passing
// owned and writable by its owner alone (a sticky directory aside), the
// file itself a regular executable.
func program(p string, owned func(owner int) bool) bool {
	real, err := filepath.EvalSymlinks(p)
	if err != nil || !filepath.IsAbs(real) {
		return false
	}
	for q := real; ; q = filepath.Dir(q) {
		fi, err := os.Lstat(q)
		if err != nil {
			return false
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		switch {
		case !ok, !owned(int(st.Uid)):
			return false
		case fi.Mode().Perm()&0o022 != 0 && fi.Mode()&os.ModeSticky == 0:
			return false
		case q == real && (!fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0):
			return false
		case q == "/":
			return true
		}
	}
}
