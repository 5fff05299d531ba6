package procfs

import (
	"io/fs"

	"golang.org/x/sys/unix"
)

// NS identifies a namespace: namespaces(7) names one by the device and
// inode of its /proc/<pid>/ns link.
type NS struct{ Dev, Ino uint64 }

// Namespace stats /proc/<pid>/ns/<typ> (typ "user", "pid", "mnt",
// "cgroup", …). Another process's links need ptrace read access: a process
// that made itself non-dumpable cannot be read. A process that is gone is
// fs.ErrNotExist.
func Namespace(pid int, typ string) (NS, error) {
	p := Path(pid, "ns/"+typ)
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		if err == unix.ESRCH {
			err = unix.ENOENT
		}
		return NS{}, &fs.PathError{Op: "stat", Path: p, Err: err}
	}
	return NS{Dev: st.Dev, Ino: st.Ino}, nil
}
