package procfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
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
func read(pid int, name string) ([]byte, error) {
	b, err := os.ReadFile(Path(pid, name))
	if errors.Is(err, unix.ESRCH) {
		err = fmt.Errorf("read %s: %w", Path(pid, name), fs.ErrNotExist)
	}
	return b, err
}
