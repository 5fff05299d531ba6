package activation

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// A socket's cgroup is fixed when it is made, a cgroup's place in the tree
// for its life (cgroup v2 has no rename), and a cgroup id is never reused
// within a boot. So where the cgroups lie is looked up for all of them at
// once (cgroupFS.look), and a look is taken at most once every lookEvery:
// a tool can make new cgroup ids as fast as it likes (a sub-cgroup made,
// a socket made in it, the sub-cgroup left and removed: no process and no
// look will ever place that id), and each would otherwise cost the server
// a read of every process's cgroup. An id the last look did not place
// waits for the next one, at most lookEvery, and is not placed if that
// one does not place it either.

// lookEvery is the least time between two looks.
const lookEvery = time.Second

// placedCgroup is where a cgroup lies: its path and the engine scope
// that holds it ("" for none).
type placedCgroup struct{ path, unit string }

// places is the last look, and the look in flight. The lock is never held
// through a look: an id the last look placed (the user's browser's) never
// waits behind one, however long a tool makes it.
type places struct {
	mu      sync.Mutex
	of      map[uint64]placedCgroup
	at      time.Time     // when the last look began
	looking chan struct{} // closed when the look in flight is in; nil when none is
	look    func() (map[uint64]string, error)
}

// errNotPlaced is a cgroup no look placed.
var errNotPlaced = errors.New("holds no process and lies in a user manager's subtree, or no longer exists")

// place says where cgroup id lies. An id the last look did not place
// waits for the next look that begins after it was asked for: the one in
// flight began before, so it may not have seen the cgroup.
func (j *Judge) place(id uint64) (placedCgroup, error) {
	pl := &j.places
	asked := time.Now()
	pl.mu.Lock()
	for {
		if p, ok := pl.of[id]; ok {
			pl.mu.Unlock()
			return p, nil
		}
		if !pl.at.Before(asked) && pl.looking == nil {
			// A look that began after the question did not place it.
			pl.mu.Unlock()
			return placedCgroup{}, fmt.Errorf("%w: the cgroup the peer's socket was made in (id %d) %w", ErrPeerUnreadable, id, errNotPlaced)
		}
		if done := pl.looking; done != nil {
			pl.mu.Unlock()
			<-done
			pl.mu.Lock()
			continue
		}
		if wait := lookEvery - time.Since(pl.at); wait > 0 {
			pl.mu.Unlock()
			time.Sleep(wait)
			pl.mu.Lock()
			continue
		}
		if err := pl.lookLocked(); err != nil {
			pl.mu.Unlock()
			return placedCgroup{}, err
		}
	}
}

// lookLocked takes a look with pl.mu released, and puts it in. Callers
// hold pl.mu; it is held again on return.
func (pl *places) lookLocked() error {
	done := make(chan struct{})
	pl.looking, pl.at = done, time.Now()
	look := pl.look
	if look == nil {
		look = lookCgroups
	}
	pl.mu.Unlock()
	paths, err := look()
	pl.mu.Lock()
	pl.looking = nil
	close(done)
	if err != nil {
		return err
	}
	pl.of = make(map[uint64]placedCgroup, len(paths))
	for cg, path := range paths {
		pl.of[cg] = placedCgroup{path: path, unit: engineScope([]string{path})}
	}
	return nil
}

// lookCgroups is a look at the cgroup2 mount.
func lookCgroups() (map[uint64]string, error) {
	c, err := openCgroup2()
	if err != nil {
		return nil, err
	}
	return c.look()
}

// SocketScope says in which engine scope the peer's socket of a loopback
// TCP connection was made ("" for none), from the kernel's record of the
// socket's cgroup; known is false where that cannot be found out (not TCP,
// no such socket, no cgroup reported, a cgroup no look places).
func (j *Judge) SocketScope(c net.Conn) (unit string, known bool) {
	local, remote, ok := tcpEnds(c)
	if !ok {
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

// JudgeSocket decides what the peer's socket of a loopback TCP connection
// decides alone (steps 1 and 2 of JudgeConn): a socket that is not found,
// is another uid's, is held by no process, or was made in a cgroup that
// is not reported, not placed, or inside an engine scope is refused, and
// decided is true. A server can ask it before a connection queues for a
// full judgement: what it refuses takes no turn. decided is false where
// only the socket's holders can decide (JudgeConn), and for a connection
// that is not loopback TCP.
func (j *Judge) JudgeSocket(c net.Conn) (v Verdict, decided bool) {
	local, remote, ok := tcpEnds(c)
	if !ok {
		return Verdict{}, false
	}
	_, _, v, decided = j.judgeSocket(local, remote)
	return v, decided
}

// tcpEnds are the ends of a TCP connection; ok is false for another kind.
func tcpEnds(c net.Conn) (local, remote *net.TCPAddr, ok bool) {
	local, ok = c.LocalAddr().(*net.TCPAddr)
	remote, ok2 := c.RemoteAddr().(*net.TCPAddr)
	return local, remote, ok && ok2
}
