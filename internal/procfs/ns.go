package procfs

import (
	"fmt"
	"os"
	"syscall"
)

// NS identifies a namespace: namespaces(7) names one by the device and
// inode of its /proc/<pid>/ns link.
type NS struct{ Dev, Ino uint64 }

// Namespace stats /proc/<pid>/ns/<typ> (typ "user", "pid", "mnt",
// "cgroup", …). Another process's links need ptrace read access: a process
// that made itself non-dumpable cannot be read.
func Namespace(pid int, typ string) (NS, error) {
	p := Path(pid, "ns/"+typ)
	fi, err := os.Stat(p)
	if err != nil {
		return NS{}, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return NS{}, fmt.Errorf("stat %s: no inode", p)
	}
	return NS{Dev: st.Dev, Ino: st.Ino}, nil
}
