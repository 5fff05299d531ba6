package activation

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"syscall"

	"golang.org/x/sys/unix"
)

// tcpSocket is what inet_diag says of one TCP socket.
type tcpSocket struct {
	uid   int
	inode uint64
	// cgroup is the id of the cgroup v2 the socket was made in (the
	// creating process's at socket(2)); it does not follow the socket when
	// the descriptor is passed on. 0 when the kernel did not report one.
	cgroup uint64
}

// Sizes and numbers of <linux/inet_diag.h> and <linux/netlink.h>.
const (
	nlmsgHdrLen       = 16
	inetDiagReqLen    = 56 // inet_diag_req_v2 with its inet_diag_sockid
	inetDiagMsgLen    = 72 // inet_diag_msg
	inetDiagCgroupID  = 21 // INET_DIAG_CGROUP_ID, Linux ≥ 5.7
	tcpStatesAll      = 0xffffffff
	inetDiagNoCookie  = 0xffffffff
	diagRecvBufLen    = 8192
	nlmsgErrorPayload = 4
	sockEndsLen       = 36 // ports and addresses of inet_diag_sockid
	tcpListen         = 10 // TCP_LISTEN of <net/tcp_states.h>
)

// diagTCP asks the kernel (NETLINK_SOCK_DIAG, an exact lookup, not a
// dump) for the TCP socket whose local address is local and whose remote
// address is remote, in this network namespace. A v4-mapped address is
// looked up as IPv4, where the kernel hashes such sockets.
func diagTCP(local, remote netip.AddrPort) (tcpSocket, error) {
	family := byte(unix.AF_INET6)
	if local.Addr().Is4() {
		family = unix.AF_INET
	}
	req := make([]byte, nlmsgHdrLen+inetDiagReqLen)
	ne := binary.NativeEndian
	ne.PutUint32(req[0:], uint32(len(req)))
	ne.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	ne.PutUint16(req[6:], unix.NLM_F_REQUEST)
	ne.PutUint32(req[8:], 1)
	r := req[nlmsgHdrLen:]
	r[0], r[1] = family, unix.IPPROTO_TCP
	ne.PutUint32(r[4:], tcpStatesAll)
	id := r[8:]
	ends := sockEnds(local, remote)
	copy(id, ends[:])
	ne.PutUint32(id[40:], inetDiagNoCookie)
	ne.PutUint32(id[44:], inetDiagNoCookie)

	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return tcpSocket{}, fmt.Errorf("%w: netlink sock_diag: %w", ErrPeerUnreadable, err)
	}
	defer unix.Close(fd)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return tcpSocket{}, fmt.Errorf("%w: netlink sock_diag: send: %w", ErrPeerUnreadable, err)
	}
	buf := make([]byte, diagRecvBufLen)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return tcpSocket{}, fmt.Errorf("%w: netlink sock_diag: receive: %w", ErrPeerUnreadable, err)
	}
	return parseDiag(buf[:n], local, remote)
}

// sockEnds is the part of an inet_diag_sockid that names a connection:
// source and destination port (network order), then source and
// destination address, each in 16 bytes (an IPv4 address in the first
// four, the rest zero, as the kernel answers it too).
func sockEnds(local, remote netip.AddrPort) (e [sockEndsLen]byte) {
	binary.BigEndian.PutUint16(e[0:], local.Port())
	binary.BigEndian.PutUint16(e[2:], remote.Port())
	copy(e[4:20], local.Addr().AsSlice())
	copy(e[20:36], remote.Addr().AsSlice())
	return e
}

// sameEnds says whether the ends an answer of family names are local and
// remote. An IPv6 socket connected to an IPv4 address (a dual-stack
// client, ::ffff:127.0.0.1) is found by the IPv4 lookup and answered as
// IPv6, its addresses in their v4-mapped form.
func sameEnds(family byte, got []byte, local, remote netip.AddrPort) bool {
	if want := sockEnds(local, remote); bytes.Equal(got, want[:]) {
		return true
	}
	if family != unix.AF_INET6 || !local.Addr().Is4() || !remote.Addr().Is4() {
		return false
	}
	mapped := func(a netip.AddrPort) netip.AddrPort {
		return netip.AddrPortFrom(netip.AddrFrom16(a.Addr().As16()), a.Port())
	}
	want := sockEnds(mapped(local), mapped(remote))
	return bytes.Equal(got, want[:])
}

// parseDiag reads the one answer to an exact lookup: an inet_diag_msg and
// its attributes, or an error message (ENOENT: no such socket here).
//
// Only the connected socket asked about is an answer. When none matches,
// the kernel's lookup goes on to the listeners (__inet_lookup tries them
// after the established sockets) and answers with one listening on the
// local address and port: the socket of a peer that reset its connection
// after its request would be judged by whoever listens where it was
// bound, a same-uid process outside every engine that it bound beside
// with SO_REUSEPORT, or that took the port after it.
func parseDiag(b []byte, local, remote netip.AddrPort) (tcpSocket, error) {
	ne := binary.NativeEndian
	if len(b) < nlmsgHdrLen {
		return tcpSocket{}, fmt.Errorf("%w: netlink sock_diag: short answer (%d bytes)", ErrPeerUnreadable, len(b))
	}
	l := int(ne.Uint32(b[0:]))
	if l < nlmsgHdrLen || l > len(b) {
		return tcpSocket{}, fmt.Errorf("%w: netlink sock_diag: bad length %d", ErrPeerUnreadable, l)
	}
	typ, msg := ne.Uint16(b[4:]), b[nlmsgHdrLen:l]
	if typ == unix.NLMSG_ERROR {
		if len(msg) < nlmsgErrorPayload {
			return tcpSocket{}, fmt.Errorf("%w: netlink sock_diag: short error", ErrPeerUnreadable)
		}
		errno := syscall.Errno(-int32(ne.Uint32(msg)))
		if errno == unix.ENOENT {
			return tcpSocket{}, fmt.Errorf("%w: no socket %s → %s in this network namespace (the peer is on another machine or in another network namespace, or is gone)", ErrPeerUnreadable, local, remote)
		}
		return tcpSocket{}, fmt.Errorf("%w: netlink sock_diag: %w", ErrPeerUnreadable, errno)
	}
	if typ != unix.SOCK_DIAG_BY_FAMILY || len(msg) < inetDiagMsgLen {
		return tcpSocket{}, fmt.Errorf("%w: netlink sock_diag: unexpected answer type %d, %d bytes", ErrPeerUnreadable, typ, len(msg))
	}
	if msg[1] == tcpListen || !sameEnds(msg[0], msg[4:4+sockEndsLen], local, remote) {
		return tcpSocket{}, fmt.Errorf("%w: no connected socket %s → %s in this network namespace (the kernel answered with another socket, in TCP state %d): the peer is gone", ErrPeerUnreadable, local, remote, msg[1])
	}
	s := tcpSocket{uid: int(ne.Uint32(msg[64:])), inode: uint64(ne.Uint32(msg[68:]))}
	for a := msg[inetDiagMsgLen:]; len(a) >= 4; {
		alen, atyp := int(ne.Uint16(a[0:])), ne.Uint16(a[2:])
		if alen < 4 || alen > len(a) {
			break
		}
		if atyp == inetDiagCgroupID && alen >= 12 {
			s.cgroup = ne.Uint64(a[4:])
		}
		a = a[min((alen+3)&^3, len(a)):]
	}
	return s, nil
}
