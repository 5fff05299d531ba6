package activation

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/mosaic-agents/mosaic/internal/procfs"
)

// A loopback TCP connection carries no SO_PEERCRED, and its peer is
// whatever processes hold the other socket. JudgeConn judges them:
//
//  1. The peer's socket, by its exact 4-tuple (its local address is our
//     remote one and the other way round), from the kernel
//     (NETLINK_SOCK_DIAG, inet_diag): the uid that made it, its inode and
//     the cgroup it was made in. Not found means the peer is not a socket
//     of this network namespace (another machine, another netns) or is
//     gone; inode 0 means no process holds it any more (it was closed
//     after sending). Either way nobody can be vouched for.
//  2. The cgroup the socket was made in must lie outside every engine
//     scope. The kernel records it at socket(2) and nothing the process
//     does later changes it, so a tool that made itself unreadable (not
//     dumpable) is still seen: a confined engine cannot leave its cgroup
//     subtree, so every socket it makes carries its scope. The id is mapped
//     to a path without walking what an engine can grow (cgroupid.go); a
//     cgroup that no longer exists, or that holds no process and lies in a
//     user manager's subtree, cannot be vouched for.
//  3. Every process holding the inode, found by reading /proc/<pid>/fd of
//     every process the server can read: a socket may be shared (inherited,
//     passed over a Unix socket), and every holder found must pass Judge,
//     checked to still hold the inode after its pidfd was taken (a pid
//     reused between the scan and pidfd_open names a process without the
//     socket). A process whose descriptors cannot be read (not dumpable,
//     another uid) is not seen here: a socket made inside an engine is
//     refused by step 2, and one made outside reaches an unreadable process
//     only if something outside hands it over. Processes inside engine
//     scopes are read up to engineFds descriptors in all (a tool holds as
//     many as it likes), the others whole.
//  4. No readable holder at all is a refusal when the socket was made in
//     the user manager's subtree (user@UID.service, where engines and
//     every cgroup the user can move a process into live): an unconfined
//     tool that left its scope and made itself non-dumpable would look
//     like that. A socket made outside it — sshd's session scope, when an
//     SSH port forward connects (sshd is not dumpable) — was made by a
//     process no tool can become without logging in on its own.
//
// /proc/net/tcp has the uid and inode but not the cgroup, and would be read
// whole for one row. The cost that matters is step 3 (one readlink per open
// descriptor of every process the server can read, up to the first engine
// holder, those of engine processes up to engineFds): a process of the
// user's with many descriptors makes every judgement slower, and the web
// server bounds how many run at once. BenchmarkJudgeTCP and
// BenchmarkJudgeTCPEngineCgroups measure it.

// JudgeConn judges the peer of an accepted connection: a Unix socket's by
// SO_PEERCRED and SO_PEERPIDFD, a loopback TCP connection's by the
// processes holding its other end (above). A peer of another uid is an
// engine peer here too: the web server, unlike the controller, has no
// earlier uid check.
func (j *Judge) JudgeConn(c net.Conn) Verdict {
	switch c.LocalAddr().(type) {
	case *net.UnixAddr:
		p, err := OpenPeer(c)
		if err != nil {
			return Verdict{Engine: true, Reason: "the peer cannot be vouched for: " + err.Error()}
		}
		defer p.Close()
		if p.UID != os.Getuid() {
			return Verdict{Engine: true, Reason: fmt.Sprintf("the peer runs as uid %d, not as the server's uid %d", p.UID, os.Getuid())}
		}
		return j.Judge(p)
	case *net.TCPAddr:
		return j.judgeTCP(c.LocalAddr().(*net.TCPAddr), c.RemoteAddr().(*net.TCPAddr))
	}
	return Verdict{Engine: true, Reason: fmt.Sprintf("the peer of a %s connection cannot be judged", c.LocalAddr().Network())}
}

func (j *Judge) judgeTCP(local, remote *net.TCPAddr) Verdict {
	sock, place, v, decided := j.judgeSocket(local, remote)
	if decided {
		return v
	}
	engine := func(format string, args ...any) Verdict {
		return Verdict{Engine: true, Reason: fmt.Sprintf(format, args...)}
	}
	cg := place.path
	// Each holder is judged as the scan finds it: the first engine holder
	// decides, and the descriptors of the processes after it are not read.
	var refused Verdict
	found, held := 0, 0
	_, err := eachHolder(sock.inode, func(pid int) bool {
		found++
		v, ok := j.judgeHolder(pid, sock.inode)
		if v.Engine {
			refused = v
			return false
		}
		if ok {
			held++
		}
		return true
	})
	if err != nil {
		return engine("the peer cannot be vouched for: %v", err)
	}
	if refused.Engine {
		return refused
	}
	if found == 0 {
		if !inManager(cg, os.Getuid()) {
			// Made in a login session's scope or a system service (sshd
			// forwarding a port, which is not dumpable): no tool of an
			// engine can make a socket there, confined or not.
			return Verdict{}
		}
		return engine("no process the server can read holds the peer's socket %s (inode %d, made in %s)", remote, sock.inode, cg)
	}
	if held == 0 {
		return engine("every process that held the peer's socket %s exited or let it go while it was judged", remote)
	}
	return Verdict{}
}

// judgeSocket is steps 1 and 2 of JudgeConn: what the peer's socket
// decides alone. decided is false where only its holders can decide.
func (j *Judge) judgeSocket(local, remote *net.TCPAddr) (sock tcpSocket, place placedCgroup, v Verdict, decided bool) {
	engine := func(format string, args ...any) (tcpSocket, placedCgroup, Verdict, bool) {
		return sock, place, Verdict{Engine: true, Reason: fmt.Sprintf(format, args...)}, true
	}
	sock, err := diagTCP(addrPort(remote), addrPort(local))
	if err != nil {
		return engine("the peer cannot be vouched for: %v", err)
	}
	if sock.uid != os.Getuid() {
		return engine("the peer's socket belongs to uid %d, not to the server's uid %d", sock.uid, os.Getuid())
	}
	if sock.inode == 0 {
		return engine("the peer's socket %s is held by no process (it was closed after sending)", remote)
	}
	if sock.cgroup == 0 {
		return engine("the peer cannot be vouched for: the kernel did not say which cgroup its socket was made in (Linux ≥ 5.7 with cgroup v2 reports it)")
	}
	place, err = j.place(sock.cgroup)
	if err != nil {
		return engine("the peer cannot be vouched for: %v", err)
	}
	if place.unit != "" {
		return engine("the peer's socket was made inside the engine scope %s (an agent's tool)", place.unit)
	}
	return sock, place, Verdict{}, false
}

// judgeHolder judges pid as a holder of inode. ok is false when pid turned
// out not to hold it once a pidfd was taken (it exited, closed it, or the
// pid now names another process): such a pid is no holder, not a verdict.
func (j *Judge) judgeHolder(pid int, inode uint64) (v Verdict, ok bool) {
	p, err := ProcessPeer(pid)
	if err != nil {
		return Verdict{}, false
	}
	defer p.Close()
	if holds, err := holdsInode(pid, inode); err != nil || !holds {
		if errors.Is(err, fs.ErrPermission) {
			// It held the socket a moment ago and is unreadable now (made
			// itself non-dumpable): it cannot be vouched for.
			return Verdict{Engine: true, Reason: fmt.Sprintf("pid %d holds the peer's socket and can no longer be read", pid)}, true
		}
		return Verdict{}, false
	}
	if err := p.alive(); err != nil {
		return Verdict{}, false
	}
	return j.Judge(p), true
}

// engineFds bounds the descriptors of processes inside engine scopes
// that one judgement reads. A tool holds descriptors by the million if it
// likes (dup(2) of one file, 8 bytes of kernel memory each, within its
// RLIMIT_NOFILE and TasksMax), and each read costs about 5 µs: read
// whole, they made every web request wait seconds. What the bound leaves
// unread is a socket made outside the engines that something outside
// handed to a tool (step 3's only engine holder: step 2 refuses every
// socket made inside), and its maker's copy is still judged. 16384
// descriptors are about 80 ms.
const engineFds = 1 << 14

// eachHolder calls f with each pid, among the processes whose descriptors
// can be read, that holds socket:[inode], until f returns false. A process
// that exits during the scan is passed over. Processes inside engine
// scopes are read only up to engineFds descriptors in all (engineRead says
// how many were); the others, which no tool can make, are read whole.
func eachHolder(inode uint64, f func(pid int) bool) (engineRead int, err error) {
	d, err := os.Open("/proc")
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrPeerUnreadable, err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return 0, fmt.Errorf("%w: list /proc: %w", ErrPeerUnreadable, err)
	}
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil || pid <= 0 {
			continue
		}
		fds, err := openFds(pid)
		if err != nil {
			continue // gone, or not ours to read
		}
		engine, limit := inEngine(pid), -1
		if engine {
			limit = engineFds - engineRead
		}
		held, read, err := scanFds(fds, inode, limit)
		fds.Close()
		if engine {
			engineRead += read
		}
		if err == nil && held && !f(pid) {
			return engineRead, nil
		}
	}
	return engineRead, nil
}

// inEngine reports whether pid runs inside an engine scope now. A
// confined process cannot leave its scope, so the answer holds for the
// rest of the scan.
func inEngine(pid int) bool {
	paths, err := procfs.Cgroups(pid)
	return err == nil && engineScope(paths) != ""
}

// holdsInode reports whether any descriptor of pid is socket:[inode],
// every descriptor read.
func holdsInode(pid int, inode uint64) (bool, error) {
	fds, err := openFds(pid)
	if err != nil {
		return false, err
	}
	defer fds.Close()
	held, _, err := scanFds(fds, inode, -1)
	return held, err
}

// openFds opens pid's descriptor directory.
func openFds(pid int) (*os.File, error) {
	return os.Open("/proc/" + strconv.Itoa(pid) + "/fd")
}

// scanFds reports whether any descriptor in the open fd directory fds is
// socket:[inode], reading at most limit of them (all when limit < 0), and
// how many it read. The links are read relative to the directory into one
// buffer: an engine that holds many descriptors makes every judgement read
// them (BenchmarkHoldsInode), and a path walk and two allocations per
// descriptor add to the kernel's own cost of the link. The link is read,
// never stat(2)ed: stat follows it into the file's filesystem, and a
// descriptor on a FUSE file the agent serves could hold the judgement.
func scanFds(fds *os.File, inode uint64, limit int) (held bool, read int, err error) {
	raw, err := fds.SyscallConn()
	if err != nil {
		return false, 0, err
	}
	target := []byte("socket:[" + strconv.FormatUint(inode, 10) + "]")
	buf := make([]byte, len(target)+1) // one more: a longer link is no match
	for limit < 0 || read < limit {
		n := 1024
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
		if cerr := raw.Control(func(dfd uintptr) {
			for _, fd := range names {
				if n, err := unix.Readlinkat(int(dfd), fd, buf); err == nil && n == len(target) && bytes.Equal(buf[:n], target) {
					held = true
					return
				}
			}
		}); cerr != nil {
			return false, read, cerr
		}
		if held {
			return true, read, nil
		}
	}
	return false, read, nil
}

// addrPort is a's address unmapped (a v4 peer of a dual-stack listener is
// ::ffff:127.0.0.1 there and 127.0.0.1 in the kernel's v4 table).
func addrPort(a *net.TCPAddr) netip.AddrPort {
	ip, _ := netip.AddrFromSlice(a.IP)
	return netip.AddrPortFrom(ip.Unmap(), uint16(a.Port))
}

// inManager reports whether the cgroup path lies in the user manager's
// subtree (user@UID.service), where every engine scope, every unit the
// user starts and every cgroup the user may move a process into lies.
func inManager(cg string, uid int) bool {
	return slices.Contains(strings.Split(cg, "/"), fmt.Sprintf("user@%d.service", uid))
}
