package activation

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mosaic-agents/mosaic/internal/procfs"
)

// Step 3 of a TCP judgement reads the descriptors of every process the
// server can read. A tool decides what reading its own processes costs:
// it holds descriptors by the million if it likes (dup(2) of one file, 8
// bytes of kernel memory each, within its RLIMIT_NOFILE and TasksMax), of
// a file thousands of directories deep (each link read rebuilds the path),
// in a table it grew once and emptied. Read whole, they made every web
// request wait seconds. So processes inside engine scopes are read after
// every other, the fewest descriptors first (tableCount), and only up to
// engineFds descriptors and engineTime in all: what a judgement leaves
// unread is a handed socket (step 3's only engine holder; step 2 refuses
// every socket made inside) in a tool behind a bound's worth of smaller
// tables, or in a process born after /proc was listed (a tool that keeps
// forking; docs/security.md). Processes outside every engine scope, which
// no tool can make, are read whole.
const (
	engineFds  = 1 << 14 // about 80 ms of links to plain files
	engineTime = 100 * time.Millisecond
)

// engineBatch is how many descriptor names an engine process's scan
// reads between two looks at the clock.
const engineBatch = 256

// eachHolder calls f with each pid, among the processes whose descriptors
// can be read, that holds socket:[inode], until f returns false. A process
// that exits during the scan is passed over. engineRead says how many
// descriptors of engine processes were read.
func eachHolder(inode uint64, f func(pid int) bool) (engineRead int, err error) {
	return eachHolderIn(newEngineSet(), inode, f)
}

// eachHolderIn is eachHolder with the engine scopes' pids learned into
// known.
func eachHolderIn(known *engineSet, inode uint64, f func(pid int) bool) (engineRead int, err error) {
	d, err := os.Open("/proc")
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrPeerUnreadable, err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return 0, fmt.Errorf("%w: list /proc: %w", ErrPeerUnreadable, err)
	}
	var engines []engineProc
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil || pid <= 0 {
			continue
		}
		if known.holds(pid) {
			engines = append(engines, engineProc{pid: pid})
			continue
		}
		fds, err := openFds(pid)
		if err != nil {
			continue // gone, or not ours to read
		}
		if engine, unified := inEngine(pid); engine {
			// Counted and read after the others, within engineTime: here a
			// tool of many processes costs a judgement only this much, and
			// its scope's other processes nothing (engineSet).
			engines = append(engines, engineProc{pid: pid})
			fds.Close()
			known.learn(pid, unified)
			continue
		}
		held, _, err := scanFds(fds, inode, -1, time.Time{})
		fds.Close()
		if err == nil && held && !f(pid) {
			return 0, nil
		}
	}
	// A tool's process with a small table, the one holder a naive tool
	// shows, is read before another's bound's worth of descriptors. The
	// processes not counted by the deadline are not read.
	deadline := time.Now().Add(engineTime)
	counted := engines[:0]
	for _, e := range engines {
		if time.Now().After(deadline) {
			break
		}
		e.tables = append([]string{fdDir(e.pid)}, threadTables(e.pid)...)
		if e.fds = tableCount(e.tables); e.fds >= 0 {
			counted = append(counted, e)
		}
	}
	slices.SortStableFunc(counted, func(a, b engineProc) int { return cmp.Compare(a.fds, b.fds) })
	for _, e := range counted {
		left := engineFds - engineRead
		if left <= 0 || time.Now().After(deadline) {
			break
		}
		held, read, _ := scanDirs(e.tables, inode, left, deadline)
		engineRead += read
		if held && !f(e.pid) {
			break
		}
	}
	return engineRead, nil
}

// threadTables returns the fd directories of pid's threads that keep a
// descriptor table of their own: /proc/<pid>/fd is the thread group
// leader's table, and a tool's thread that unshared its table
// (unshare(CLONE_FILES)), or a process whose leader thread exited (its
// table reads empty), holds descriptors it does not list.
func threadTables(pid int) []string {
	base := "/proc/" + strconv.Itoa(pid) + "/task/"
	d, err := os.Open(base)
	if err != nil {
		return nil
	}
	defer d.Close()
	tids, _ := d.Readdirnames(-1)
	var dirs []string
	for _, t := range tids {
		tid, err := strconv.Atoi(t)
		if err != nil || tid == pid || sameFiles(pid, tid) {
			continue
		}
		dirs = append(dirs, base+t+"/fd")
	}
	return dirs
}

// scanDirs reads the fd directories dirs in turn, within limit (none when
// < 0) and deadline (none when zero) in all, until one holds
// socket:[inode]. Where none does, the first error met is the answer's:
// a table that became unreadable (EACCES) is one that cannot be vouched
// for.
func scanDirs(dirs []string, inode uint64, limit int, deadline time.Time) (held bool, read int, err error) {
	for _, dir := range dirs {
		if (limit >= 0 && read >= limit) || (!deadline.IsZero() && time.Now().After(deadline)) {
			break
		}
		fds, oerr := os.Open(dir)
		if oerr != nil {
			err = cmp.Or(err, oerr)
			continue
		}
		left := -1
		if limit >= 0 {
			left = limit - read
		}
		h, n, serr := scanFds(fds, inode, left, deadline)
		fds.Close()
		read += n
		if serr == nil && h {
			return true, read, nil
		}
		err = cmp.Or(err, serr)
	}
	return false, read, err
}

// kcmpFiles is kcmp(2)'s KCMP_FILES: whether two tasks share one
// descriptor table.
const kcmpFiles = 2

// sameFiles reports whether task tid shares the descriptor table of
// process pid's leader. Where the kernel cannot say (no kcmp(2), a task
// gone), the thread's table is read as if it were its own.
func sameFiles(pid, tid int) bool {
	r, _, errno := unix.Syscall6(unix.SYS_KCMP, uintptr(pid), uintptr(tid), kcmpFiles, 0, 0, 0)
	return errno == 0 && r == 0
}

// engineProc is a process inside an engine scope, the fd directories of
// its descriptor tables (its leader's first, then threadTables) and how
// many descriptors they held when it was counted (tableCount).
type engineProc struct {
	pid, fds int
	tables   []string
}

// tableCount is how many descriptors the tables in dirs hold, a table two
// threads share counted twice; -1 when the first, the leader's, cannot be
// opened (the process is gone). So a process is sorted no earlier than
// what reading it costs: a tool's thread holding a bound's worth in a
// table of its own does not go ahead of a holder with a small leader's
// table. Sizes are the kernel's (Linux 6.2); before, each is 0.
func tableCount(dirs []string) int {
	n := 0
	for i, dir := range dirs {
		f, err := os.Open(dir)
		if err != nil {
			if i == 0 {
				return -1
			}
			continue
		}
		n += fdCount(f)
		f.Close()
	}
	return n
}

// fdCount is the number of descriptors open in the fd directory fds, as
// the kernel gives it for the directory's size (Linux 6.2), 0 otherwise.
func fdCount(fds *os.File) int {
	var st unix.Stat_t
	raw, err := fds.SyscallConn()
	if err != nil {
		return 0
	}
	if cerr := raw.Control(func(fd uintptr) { err = unix.Fstat(int(fd), &st) }); cerr != nil || err != nil {
		return 0
	}
	return int(st.Size)
}

// inEngine reports whether pid runs inside an engine scope now, and its
// cgroup2 path from the same read (for engineSet.learn). A confined
// process cannot leave its scope, so the answer holds for the rest of the
// scan.
func inEngine(pid int) (bool, string) {
	paths, unified, err := procfs.CgroupPaths(pid)
	return err == nil && engineScope(paths) != "", unified
}

// holdsInode reports whether any descriptor of pid, or of one of its
// threads' own tables, is socket:[inode], every descriptor read. The
// threads are listed only when the leader's table does not hold it. The
// error is the first met, when none does.
func holdsInode(pid int, inode uint64) (bool, error) {
	held, _, err := scanDirs([]string{fdDir(pid)}, inode, -1, time.Time{})
	if held {
		return true, nil
	}
	held, _, terr := scanDirs(threadTables(pid), inode, -1, time.Time{})
	if held {
		return true, nil
	}
	return false, cmp.Or(err, terr)
}

// fdDir is pid's descriptor directory: its leader thread's table.
func fdDir(pid int) string { return "/proc/" + strconv.Itoa(pid) + "/fd" }

// openFds opens pid's descriptor directory.
func openFds(pid int) (*os.File, error) { return os.Open(fdDir(pid)) }

// scanFds reports whether any descriptor in the open fd directory fds is
// socket:[inode], and how many it read: at most limit of them (all when
// limit < 0), and none once deadline passed (never, when it is zero). The
// links are read relative to the directory into one buffer: an engine
// that holds many descriptors makes every judgement read them
// (BenchmarkHoldsInode), and a path walk and two allocations per
// descriptor add to the kernel's own cost of the link. The link is read,
// never stat(2)ed: stat follows it into the file's filesystem, and a
// descriptor on a FUSE file the agent serves could hold the judgement.
func scanFds(fds *os.File, inode uint64, limit int, deadline time.Time) (held bool, read int, err error) {
	raw, err := fds.SyscallConn()
	if err != nil {
		return false, 0, err
	}
	target := []byte("socket:[" + strconv.FormatUint(inode, 10) + "]")
	buf := make([]byte, len(target)+1) // one more: a longer link is no match
	batch := 1024
	if !deadline.IsZero() {
		batch = engineBatch
	}
	for (limit < 0 || read < limit) && (deadline.IsZero() || time.Now().Before(deadline)) {
		n := batch
		if limit >= 0 {
			n = min(n, limit-read)
		}
		names, err := fds.Readdirnames(n)
		if len(names) == 0 {
			if errors.Is(err, io.EOF) {
				return false, read, nil
			}
			return false, read, err
		}
		read += len(names)
		var denied error
		if cerr := raw.Control(func(dfd uintptr) {
			for _, fd := range names {
				n, err := unix.Readlinkat(int(dfd), fd, buf)
				switch {
				case err == nil && n == len(target) && bytes.Equal(buf[:n], target):
					held = true
					return
				case errors.Is(err, unix.EACCES):
					// The process became unreadable after its directory
					// was opened (made itself non-dumpable).
					denied = err
					return
				}
			}
		}); cerr != nil {
			return false, read, cerr
		}
		if held {
			return true, read, nil
		}
		if denied != nil {
			return false, read, denied
		}
	}
	return false, read, nil
}
