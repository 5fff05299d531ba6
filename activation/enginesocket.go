package activation

import (
	"fmt"
	"net"
	"sync"
)

// A socket's cgroup is fixed when it is made, a cgroup's place in the tree
// for its life, and a cgroup id is never reused within a boot: whether a
// cgroup id lies in an engine scope is true once and for good, unlike a
// verdict on a connection (whose holders change). So the answer is kept,
// and a server can refuse an engine's socket before it queues for a full
// judgement: a tool that floods a server with requests, each judged
// slowly (it holds many descriptors), takes no place in that queue.

// maxEngineCgroups bounds the answers kept; past it they are all dropped
// and found again.
const maxEngineCgroups = 4096

// placedCgroup is where a cgroup lies: its path and the engine scope
// that holds it ("" for none).
type placedCgroup struct{ path, unit string }

// engineCgroups keeps where each cgroup id lies.
type engineCgroups struct {
	mu sync.Mutex
	of map[uint64]placedCgroup
}

func (e *engineCgroups) get(id uint64) (placedCgroup, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	p, ok := e.of[id]
	return p, ok
}

func (e *engineCgroups) put(id uint64, p placedCgroup) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.of == nil || len(e.of) >= maxEngineCgroups {
		e.of = map[uint64]placedCgroup{}
	}
	e.of[id] = p
}

// place says where cgroup id lies; an id whose path cannot be found is
// an error, and not kept (a cgroup found later is then found).
func (j *Judge) place(id uint64) (placedCgroup, error) {
	if p, ok := j.engines.get(id); ok {
		return p, nil
	}
	cg, err := cgroupPath(id)
	if err != nil {
		return placedCgroup{}, err
	}
	p := placedCgroup{path: cg, unit: engineScope([]string{cg})}
	j.engines.put(id, p)
	return p, nil
}

// SocketScope says in which engine scope the peer's socket of a loopback
// TCP connection was made ("" for none), from the kernel's record of the
// socket's cgroup; known is false where that cannot be found out (not TCP,
// no such socket, no cgroup reported, a cgroup whose path is not found).
func (j *Judge) SocketScope(c net.Conn) (unit string, known bool) {
	local, ok := c.LocalAddr().(*net.TCPAddr)
	remote, ok2 := c.RemoteAddr().(*net.TCPAddr)
	if !ok || !ok2 {
		return "", false
	}
	sock, err := diagTCP(addrPort(remote), addrPort(local))
	if err != nil || sock.cgroup == 0 {
		return "", false
	}
	p, err := j.place(sock.cgroup)
	if err != nil {
		return "", false
	}
	return p.unit, true
}

// MadeInEngine judges only where the peer's socket of a loopback TCP
// connection was made (steps 1 and 2 of JudgeConn): engine says the
// socket was made inside an engine scope, and the verdict names it.
// Anything else, including a peer that cannot be looked up, is left to
// JudgeConn, which decides it in full.
func (j *Judge) MadeInEngine(c net.Conn) (v Verdict, engine bool) {
	unit, _ := j.SocketScope(c)
	if unit == "" {
		return Verdict{}, false
	}
	return Verdict{Engine: true, Reason: fmt.Sprintf("the peer's socket was made inside the engine scope %s (an agent's tool)", unit)}, true
}
