package activation

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
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
//     scopes are read after the others, up to engineFds descriptors and
//     engineTime in all (holders.go: a tool holds as many as it likes).
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
// holder; of engine processes, within engineFds and engineTime): a process
// of the user's with many descriptors makes every judgement slower, and
// the web server bounds how many run at once. BenchmarkJudgeTCP and
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
	// An engine's process is refused without reading its tables again: a
	// tool holding the socket would otherwise choose what the second
	// read costs, and a pid reused by another engine process is refused
	// when it might have been passed over, never the other way round.
	if v := j.Judge(p); v.Engine {
		return v, true
	}
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
