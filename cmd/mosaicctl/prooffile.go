package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/mosaic-agents/mosaic/internal/ids"
	"github.com/mosaic-agents/mosaic/protocol"
)

// checkProofFile refuses, before anything is stopped, a --proof FILE that
// writeProofFile would refuse: a symlink, or anything but a regular file,
// or a directory that is not one.
func checkProofFile(file string) error {
	dir, name := filepath.Split(filepath.Clean(file))
	if dir == "" {
		dir = "."
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return protocol.Refuse(protocol.CodeProofFile, "--proof %s: the directory %s does not exist or is not a directory; create it or name another file", file, dir)
	}
	return checkTarget(dir, name, file)
}

// checkTarget looks at FILE without following it.
func checkTarget(dir, name, file string) error {
	fi, err := os.Lstat(filepath.Join(dir, name))
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return protocol.Wrap(protocol.CodeProofFile, err, "--proof %s", file)
	case fi.Mode()&os.ModeSymlink != 0:
		return protocol.Refuse(protocol.CodeProofFileSymlink, "--proof %s is a symbolic link; the proof is never written through one: remove the link or name another file", file)
	case !fi.Mode().IsRegular():
		return notRegular(file, fi.Mode().Type())
	}
	return nil
}

// notRegular refuses a FILE of type t in words: fs.FileMode prints a
// directory as "d---------". A directory's fix is a file in it, the
// likeliest meaning of `--proof ~`.
func notRegular(file string, t fs.FileMode) error {
	kind, fix := "a special file", "name another file"
	switch {
	case t&fs.ModeDir != 0:
		kind, fix = "a directory", fmt.Sprintf("name another file, e.g. `--proof %s`", shellQuote(filepath.Join(file, "proof.json")))
	case t&fs.ModeNamedPipe != 0:
		kind = "a named pipe"
	case t&fs.ModeSocket != 0:
		kind = "a socket"
	case t&fs.ModeCharDevice != 0:
		kind = "a character device"
	case t&fs.ModeDevice != 0:
		kind = "a block device"
	}
	return protocol.Refuse(protocol.CodeProofFile, "--proof %s is %s, not a regular file; %s", file, kind, fix)
}

// fileType is the fs.FileMode type of a stat(2) mode, for notRegular.
func fileType(mode uint32) fs.FileMode {
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return fs.ModeDir
	case unix.S_IFIFO:
		return fs.ModeNamedPipe
	case unix.S_IFSOCK:
		return fs.ModeSocket
	case unix.S_IFCHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		return fs.ModeDevice
	}
	return fs.ModeIrregular
}

// writeProofFile writes data to file so that no one else's file is ever
// written and no reader ever sees half a proof: a fresh temp file in the
// same directory (O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600) is written and
// fsynced, then renamed over FILE, then the directory is fsynced.
//
// An existing regular FILE is replaced whole, by rename(2): its inode is
// never opened, so a hard link an agent planted at FILE keeps its old
// content and no other name of that inode changes. A symlink at FILE is
// refused. The directory is opened once and everything after happens
// relative to that descriptor, so swapping a directory of the path for a
// symlink during the write changes nothing. A symlink among FILE's
// directories that exists before the command runs is followed: that path
// is the one the user named.
func writeProofFile(file string, data []byte) (err error) {
	dir, name := filepath.Split(filepath.Clean(file))
	if dir == "" {
		dir = "."
	}
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return protocol.Wrap(protocol.CodeProofFile, err, "--proof %s: open the directory %s", file, dir)
	}
	defer unix.Close(dfd)
	tmp, fd, err := createTemp(dfd, name)
	if err != nil {
		return protocol.Wrap(protocol.CodeProofFile, err, "--proof %s: create a temp file in %s (check that the directory is writable)", file, dir)
	}
	defer func() {
		if err != nil {
			unix.Unlinkat(dfd, tmp, 0)
		}
	}()
	f := os.NewFile(uintptr(fd), filepath.Join(dir, tmp))
	if err := writeAll(f, data); err != nil {
		return protocol.Wrap(protocol.CodeProofFile, err, "--proof %s: write", file)
	}
	if err := checkAt(dfd, name, file); err != nil {
		return err
	}
	if err := unix.Renameat(dfd, tmp, dfd, name); err != nil {
		return protocol.Wrap(protocol.CodeProofFile, err, "--proof %s: rename into place", file)
	}
	if err := unix.Fsync(dfd); err != nil {
		return protocol.Wrap(protocol.CodeProofFile, err, "--proof %s: sync the directory", file)
	}
	return nil
}

// createTemp creates a fresh, hidden file next to name, never through a
// symlink and never an existing file.
func createTemp(dfd int, name string) (string, int, error) {
	for range 10 {
		tmp := "." + name + ".tmp-" + ids.Hex(8)
		fd, err := unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		return tmp, fd, err
	}
	return "", -1, unix.EEXIST
}

// writeAll writes, sets the mode exactly (the umask only ever narrows it,
// but say it anyway), syncs and closes.
func writeAll(f *os.File, data []byte) error {
	_, err := f.Write(data)
	if err == nil {
		err = f.Chmod(0o600)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// checkAt is checkTarget relative to the opened directory, just before the
// rename: rename(2) never follows a symlink, but one that appeared during
// the stop is still refused rather than silently replaced.
func checkAt(dfd int, name, file string) error {
	var st unix.Stat_t
	err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil
	case err != nil:
		return protocol.Wrap(protocol.CodeProofFile, err, "--proof %s", file)
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return protocol.Refuse(protocol.CodeProofFileSymlink, "--proof %s is a symbolic link; the proof is never written through one: remove the link or name another file", file)
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return notRegular(file, fileType(st.Mode))
	}
	return nil
}

// proofNotWritten is the verdict of a stop that ended stopped but whose
// proof could not be written to FILE: done, not as asked (exit 4), with
// the write's code first. The proof is not lost: the stop record printed
// above carries it, and the claim store and the journal hold it.
func proofNotWritten(err error, stop, id string) error {
	code, msg := protocol.CodeProofFile, err.Error()
	var r *protocol.Refusal
	if errors.As(err, &r) {
		code, msg = r.Code, r.Message
	}
	return unsettled(code, "the cohort is stopped (stop %s) but the proof was not written: %s; `mosaicctl audit %s` re-verifies it from the journal", stop, msg, id)
}
