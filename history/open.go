package history

import (
	"errors"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/mosaic-agents/mosaic/protocol"
)

// DefaultMaxSize is the largest session file the reader accepts (seed 003:
// over 256 MiB refuses too-large).
const DefaultMaxSize int64 = 256 << 20

// source is an opened session file: the descriptor plus the identity the
// reader pinned before opening it.
type source struct {
	f    *os.File
	dev  uint64
	ino  uint64
	size int64
}

// openSafe opens path read-only without following a symlink in its last
// two components. The parent directory is opened first (O_NOFOLLOW |
// O_DIRECTORY) and the file is opened relative to that descriptor with
// openat, so the directory cannot be swapped between the lstat and the
// open; the file's (dev, ino) is compared with the fstatat taken before
// the open, so a file swapped in between is detected. A missing file or
// directory returns (nil, nil): the conversation is new.
func openSafe(path string, max int64) (*source, error) {
	// Dir, not Split: a trailing slash on the directory would make the
	// kernel follow a symlinked sessions directory despite O_NOFOLLOW.
	dir, base := filepath.Dir(path), filepath.Base(path)
	if base == "." || base == ".." || base == string(filepath.Separator) || path == "" || path[len(path)-1] == '/' {
		return nil, protocol.Refuse(protocol.CodeUnsafePath, "session path %q names no file", path)
	}
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, nil
		}
		return nil, refuseOpen(err, "open session directory %s", dir)
	}
	defer unix.Close(dfd)

	var before unix.Stat_t
	if err := unix.Fstatat(dfd, base, &before, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, nil
		}
		return nil, refuseOpen(err, "lstat session file %s", path)
	}
	if err := checkKind(before.Mode, path); err != nil {
		return nil, err
	}
	return openAt(dfd, base, &before, path, max)
}

// openAt opens base relative to dfd and checks that it is still the
// regular file the caller's fstatat saw.
func openAt(dfd int, base string, before *unix.Stat_t, path string, max int64) (*source, error) {
	fd, err := unix.Openat(dfd, base, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, protocol.Wrap(protocol.CodeUnsafePath, err, "session file %s vanished between lstat and open", path)
		}
		return nil, refuseOpen(err, "open session file %s", path)
	}
	f := os.NewFile(uintptr(fd), path)
	var after unix.Stat_t
	if err := unix.Fstat(fd, &after); err != nil {
		f.Close()
		return nil, protocol.Wrap(protocol.CodeUnreadable, err, "fstat session file %s", path)
	}
	if err := checkKind(after.Mode, path); err != nil {
		f.Close()
		return nil, err
	}
	if uint64(after.Dev) != uint64(before.Dev) || after.Ino != before.Ino {
		f.Close()
		return nil, protocol.Refuse(protocol.CodeUnsafePath, "session file %s was swapped during open", path)
	}
	if after.Size > max {
		f.Close()
		return nil, protocol.Refuse(protocol.CodeTooLarge, "session file %s is %d bytes, over %d", path, after.Size, max)
	}
	return &source{f: f, dev: uint64(after.Dev), ino: after.Ino, size: after.Size}, nil
}

// checkKind refuses anything but a regular file.
func checkKind(mode uint32, path string) error {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return nil
	case unix.S_IFLNK:
		return protocol.Refuse(protocol.CodeUnsafePath, "session file %s is a symlink", path)
	}
	return protocol.Refuse(protocol.CodeUnsafePath, "session file %s is not a regular file", path)
}

// refuseOpen maps an open or stat error onto a refusal code: a symlink
// (ELOOP, or ENOTDIR from O_DIRECTORY|O_NOFOLLOW on a symlinked directory)
// is unsafe-path, permission is unreadable, anything else unreadable too.
func refuseOpen(err error, format string, args ...any) error {
	switch {
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
		return protocol.Wrap(protocol.CodeUnsafePath, err, format, args...)
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return protocol.Wrap(protocol.CodeUnreadable, err, format, args...)
	}
	return protocol.Wrap(protocol.CodeUnreadable, err, format, args...)
}
