package scopes

import (
	"context"
	"encoding/binary"
	"errors"
	"github.com/mosaic-agents/mosaic/internal/procfs"
	"os"
	"os/exec"
	"sync"
	"time"
)

// Handle is a launched engine.
type Handle struct {
	// Stdin is the engine's stdin. Keep it open for the engine's whole life
	// (Pi exits at EOF); closing it is not a stop.
	Stdin  *os.File
	Stdout *os.File
	Stderr *os.File // nil if Spec.Stderr was given
	Cohort Cohort

	m       *Manager
	engine  *exec.Cmd // nil after Reattach
	anchor  *exec.Cmd
	done    chan struct{}
	exitErr error
	// reapedAt and anchorReapedAt are the CLOCK_BOOTTIME times at which
	// this process reaped the engine and the anchor; valid once done and
	// anchorDone are closed. anchorDone is nil after Reattach.
	reapedAt       uint64
	anchorDone     chan struct{}
	anchorReapedAt uint64

	// hold gives the release of the manager's reference on the unit that
	// the stop in progress took (hold.go); nil when none is held.
	holdMu sync.Mutex
	hold   chan func(context.Context) error

	// stopNotice is the write end of the held child's stop pipe (held.go,
	// stopFD), closed once the held child is reaped (or, resumed, seen
	// exited); nil for an unconfined engine and after Reattach.
	stopNotice *os.File

	mu   sync.Mutex
	term []*member // TERM-phase members, pinned by pidfd, for the kill phase
	// keptStop is the stop pipe a Reattach handle took from an earlier
	// controller's (HoldKept), closed once a stop phase signalled.
	keptStop *os.File
	// leader pins the process-group fallback's engine: while its pidfd is
	// open the pid number, and so the pgid, cannot be reused, so signalling
	// the group can only reach the engine's group.
	leader *member
}

// Done is closed when the engine process has exited and been reaped. An
// exit proves nothing about the cohort: its children may live on. For a
// Reattach handle it is closed from the start (ExitErr says why).
func (h *Handle) Done() <-chan struct{} { return h.done }

// ExitErr is the engine's exit status (as exec.Cmd.Wait) once Done is closed.
func (h *Handle) ExitErr() error {
	select {
	case <-h.done:
		return h.exitErr
	default:
		return nil
	}
}

// newHandle is the Handle of an engine just released: its end of each
// pipe, and the held child it reaps.
func newHandle(m *Manager, pipes *stdio, held *heldChild, c Cohort) *Handle {
	return &Handle{
		Stdin:      pipes.inW,
		Stdout:     pipes.outR,
		Stderr:     pipes.errR,
		Cohort:     c,
		m:          m,
		engine:     held.cmd,
		stopNotice: held.stop,
		done:       make(chan struct{}),
	}
}

func (h *Handle) reap() {
	h.exitErr = h.engine.Wait()
	h.reapedAt = procfs.BoottimeNanos()
	if h.stopNotice != nil {
		h.stopNotice.Close()
	}
	close(h.done)
}

// holdPastGrace is how long the held child holds the namespace past a
// TERM phase's grace. The kill phase starts as the grace ends and freezes
// the scope; a namespace ending at that moment SIGKILLs the tools still
// there while the freeze takes them, and a task woken to die leaves the
// frozen state (tools that ignore SIGTERM, the case the kill phase is
// for). The kill phase then waits for frozen 1 and enumerates again
// (enumerateFrozen), so a kill phase that starts this late, under load,
// still proves the stop; the hold spares it that in the common case. The
// kill phase's cgroup.kill ends the namespace anyway; after a stop that
// ended uncertain, it ends this much later.
const holdPastGrace = time.Second

// noticeStop tells the held child, before a TERM phase signals anything,
// that the phase's grace runs until until (runPID1): inside it, the
// engine's exit does not end its pid namespace, whose end would SIGKILL
// the tools still in their grace. Each TERM phase writes its own; a
// deadline passed (a stop that ended uncertain) holds nothing, and a
// later one lengthens the hold with the SIGTERM that follows it, also once
// the engine ended inside the earlier grace (a resumed stop's, K10). The
// deadline is CLOCK_BOOTTIME's, which the held child reads too (no time
// namespace), taken from a wait on the monotonic clock: a suspend inside
// the grace ends the hold early, never late. The write is 8 bytes on a
// pipe the held child empties at each signal: it does not wait, and a
// held child gone makes it fail, which changes nothing. The hold lasts
// holdPastGrace beyond the grace.
func (h *Handle) noticeStop(until time.Time) {
	if h.stopNotice == nil {
		return
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], procfs.BoottimeNanos()+uint64(max(time.Until(until), 0)+holdPastGrace))
	h.stopNotice.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	_, _ = h.stopNotice.Write(b[:])
}

func (h *Handle) reapAnchor() {
	h.anchor.Wait()
	h.anchorReapedAt = procfs.BoottimeNanos()
	close(h.anchorDone)
}

// Reattach returns a handle on a cohort recorded by an earlier controller
// (K10: a restart resumes a stop). It has no stdio and reaps nothing; Term,
// Kill and Stop re-check everything from systemd and the kernel. A record
// that kept only the claim's incarnation (boot id, pid, start time,
// cgroup) works too: see CohortOf.
func (m *Manager) Reattach(c Cohort) *Handle {
	done := make(chan struct{})
	close(done)
	m.reserveFDs()
	return &Handle{Cohort: c, m: m, done: done, exitErr: errReattached}
}

var errReattached = errors.New("reattached handle: this process is not the engine's parent, its exit is unknown")
