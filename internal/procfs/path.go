package procfs

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"

	"golang.org/x/sys/unix"
)

// Self names this process: /proc/self.
const Self = 0

// Path is /proc/<pid>/<name>, or /proc/self/<name> for Self.
func Path(pid int, name string) string {
	if pid == Self {
		return "/proc/self/" + name
	}
	return "/proc/" + strconv.Itoa(pid) + "/" + name
}

// read reads /proc/<pid>/<name>. A process that exited (ENOENT, or ESRCH
// when it dies during the read) is fs.ErrNotExist.
//
// It reads with plain system calls rather than os.ReadFile: a stop reads
// two of these files for every member of a cohort, and os.File's stat
// for the size (procfs says 0) and poller bookkeeping were a third of the
// time of each read.
func read(pid int, name string) ([]byte, error) {
	p := Path(pid, name)
	fd, err := retry(func() (int, error) { return unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0) })
	if err != nil {
		return nil, readErr("open", p, err)
	}
	defer unix.Close(fd)
	b := make([]byte, 0, 512)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := retry(func() (int, error) { return unix.Read(fd, b[len(b):cap(b)]) })
		if err != nil {
			return nil, readErr("read", p, err)
		}
		if n == 0 {
			return b, nil
		}
		b = b[:len(b)+n]
	}
}

// readLine reads /proc/<pid>/<name>, a file of one line, into buf, with
// one read when the line fits (a line that ends before buf does is
// whole) and read's way otherwise.
func readLine(pid int, name string, buf []byte) ([]byte, error) {
	p := Path(pid, name)
	fd, err := retry(func() (int, error) { return unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0) })
	if err != nil {
		return nil, readErr("open", p, err)
	}
	n, err := retry(func() (int, error) { return unix.Read(fd, buf) })
	unix.Close(fd)
	if err != nil {
		return nil, readErr("read", p, err)
	}
	if n > 0 && n < len(buf) && buf[n-1] == '\n' {
		return buf[:n], nil
	}
	return read(pid, name)
}

// retry repeats a system call interrupted by a signal.
func retry(call func() (int, error)) (int, error) {
	for {
		n, err := call()
		if err != unix.EINTR {
			return n, err
		}
	}
}

// readErr is the *fs.PathError os.ReadFile would give, with ESRCH (the
// process died during the read) as fs.ErrNotExist.
func readErr(op, p string, err error) error {
	if errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("read %s: %w", p, fs.ErrNotExist)
	}
	return &fs.PathError{Op: op, Path: p, Err: err}
}
