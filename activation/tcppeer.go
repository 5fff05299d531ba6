package activation

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// A loopback TCP connection carries no SO_PEERCRED, and its peer is
// whatever processes hold the other socket. JudgeConn finds them:
//
//  1. The peer's socket by its exact 4-tuple (its local address is our
//     remote one and the other way round) in /proc/net/tcp and tcp6 of
//     this network namespace, for the uid that made it and its inode.
//     Not found means the peer is not a socket of this namespace (another
//     machine, another netns) or is already gone; inode 0 means no process
//     holds it any more (it closed after sending). Either way nobody can be
//     vouched for.
//  2. Every process holding that inode, by reading /proc/<pid>/fd of all
//     processes: a socket may be shared (inherited, passed over a Unix
//     socket), and every holder must pass. A process whose descriptors
//     cannot be read (not dumpable, another uid) cannot be ruled out as a
//     holder: if it lies inside an engine scope, the connection is refused.
//     No holder found is a refusal.
//  3. Each holder through pidfd_open, checked to still hold the inode after
//     the pidfd was taken (a pid reused between the scan and pidfd_open
//     names a process without the socket), then judged by Judge exactly as
//     a Unix socket peer, bracketed by the pidfd's liveness.
//
// NETLINK_SOCK_DIAG (inet_diag) would find the socket by its 4-tuple
// without reading the whole table; /proc/net/tcp needs no netlink socket
// and no diag module, and the table of a workstation's loopback is small.
// The cost that matters is step 2 (one readlink per open descriptor of
// every process the server can read); BenchmarkJudgeTCP measures it.

// procNet is where the socket tables are read; tests point it elsewhere.
const procNet = "/proc/net"

// tcpSocket is one row of /proc/net/tcp{,6}.
type tcpSocket struct {
	uid   int
	inode uint64
}

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
	engine := func(format string, args ...any) Verdict {
		return Verdict{Engine: true, Reason: fmt.Sprintf(format, args...)}
	}
	sock, err := findTCP(procNet, remote, local)
	if err != nil {
		return engine("the peer cannot be vouched for: %v", err)
	}
	if sock.uid != os.Getuid() {
		return engine("the peer's socket belongs to uid %d, not to the server's uid %d", sock.uid, os.Getuid())
	}
	if sock.inode == 0 {
		return engine("the peer's socket %s is held by no process (it was closed after sending)", remote)
	}
	pids, reason, err := holders(sock.inode)
	if err != nil {
		return engine("the peer cannot be vouched for: %v", err)
	}
	if reason != "" {
		return engine("%s", reason)
	}
	if len(pids) == 0 {
		return engine("no process the server can read holds the peer's socket %s (inode %d)", remote, sock.inode)
	}
	held := 0
	for _, pid := range pids {
		v, ok := j.judgeHolder(pid, sock.inode)
		if v.Engine {
			return v
		}
		if ok {
			held++
		}
	}
	if held == 0 {
		return engine("every process that held the peer's socket %s exited or let it go while it was judged", remote)
	}
	return Verdict{}
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

// findTCP finds the socket whose local address is local and whose remote
// address is remote in dir's tcp and tcp6 tables. Addresses are compared
// unmapped, so an IPv4 peer of a dual-stack listener (::ffff:127.0.0.1)
// is found in the tcp table.
func findTCP(dir string, local, remote *net.TCPAddr) (tcpSocket, error) {
	want := [2]netip.AddrPort{addrPort(local), addrPort(remote)}
	for _, name := range []string{"tcp", "tcp6"} {
		path := dir + "/" + name
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue // no IPv6 in this kernel
		}
		if err != nil {
			return tcpSocket{}, fmt.Errorf("%w: %w", ErrPeerUnreadable, err)
		}
		s, ok, err := scanTCP(b, want)
		if err != nil {
			return tcpSocket{}, fmt.Errorf("%w: %s: %w", ErrPeerUnreadable, path, err)
		}
		if ok {
			return s, nil
		}
	}
	return tcpSocket{}, fmt.Errorf("%w: no socket %s → %s in this network namespace (the peer is on another machine or in another network namespace, or is gone)", ErrPeerUnreadable, remote, local)
}

func addrPort(a *net.TCPAddr) netip.AddrPort {
	ip, _ := netip.AddrFromSlice(a.IP)
	return netip.AddrPortFrom(ip.Unmap(), uint16(a.Port))
}

// scanTCP looks for want (local, remote) in a /proc/net/tcp{,6} table:
//
//	sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode …
func scanTCP(b []byte, want [2]netip.AddrPort) (tcpSocket, bool, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	first := true
	for sc.Scan() {
		if first {
			first = false // the header
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) < 10 {
			return tcpSocket{}, false, fmt.Errorf("short line %q", sc.Text())
		}
		l, err := parseHexAddr(f[1])
		if err != nil {
			return tcpSocket{}, false, err
		}
		r, err := parseHexAddr(f[2])
		if err != nil {
			return tcpSocket{}, false, err
		}
		if l != want[0] || r != want[1] {
			continue
		}
		uid, err := strconv.Atoi(f[7])
		if err != nil {
			return tcpSocket{}, false, fmt.Errorf("uid %q: %w", f[7], err)
		}
		inode, err := strconv.ParseUint(f[9], 10, 64)
		if err != nil {
			return tcpSocket{}, false, fmt.Errorf("inode %q: %w", f[9], err)
		}
		return tcpSocket{uid: uid, inode: inode}, true, nil
	}
	return tcpSocket{}, false, sc.Err()
}

// parseHexAddr parses the kernel's ADDR:PORT, the address as 32-bit words
// in host byte order (little-endian on every platform mosaic runs on) and
// the port big-endian hex.
func parseHexAddr(s string) (netip.AddrPort, error) {
	a, p, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("address %q: no port", s)
	}
	raw, err := hex.DecodeString(a)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, fmt.Errorf("address %q: not 4 or 16 hex bytes", s)
	}
	for i := 0; i < len(raw); i += 4 {
		binary.BigEndian.PutUint32(raw[i:], binary.LittleEndian.Uint32(raw[i:]))
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("address %q: port: %w", s, err)
	}
	ip, _ := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(ip.Unmap(), uint16(port)), nil
}

// holders returns the pids whose descriptors include socket:[inode]. A
// process whose descriptors cannot be read is not ruled out: if its cgroup
// lies in an engine scope, reason says so and the peer is refused. A
// process that exits during the scan is passed over.
func holders(inode uint64) (pids []int, reason string, err error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, "", fmt.Errorf("%w: %w", ErrPeerUnreadable, err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, "", fmt.Errorf("%w: list /proc: %w", ErrPeerUnreadable, err)
	}
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil || pid <= 0 {
			continue
		}
		held, err := holdsInode(pid, inode)
		switch {
		case errors.Is(err, fs.ErrPermission):
			if cg, err := cgroupOf(pid); err == nil {
				if unit := engineScope(cg); unit != "" {
					return nil, fmt.Sprintf("pid %d inside the engine scope %s cannot be read, so it may hold the peer's socket (a tool that made itself non-dumpable)", pid, unit), nil
				}
			}
		case err != nil:
			// Gone, or a task that is not a process: not a holder.
		case held:
			pids = append(pids, pid)
		}
	}
	return pids, "", nil
}

// holdsInode reports whether any descriptor of pid is socket:[inode].
func holdsInode(pid int, inode uint64) (bool, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd"
	f, err := os.Open(dir)
	if err != nil {
		return false, err
	}
	defer f.Close()
	fds, err := f.Readdirnames(-1)
	if err != nil {
		return false, err
	}
	target := "socket:[" + strconv.FormatUint(inode, 10) + "]"
	for _, fd := range fds {
		if l, err := os.Readlink(dir + "/" + fd); err == nil && l == target {
			return true, nil
		}
	}
	return false, nil
}
