package scopes

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/mosaic-agents/mosaic/internal/procfs"
	"github.com/mosaic-agents/mosaic/proofs"
	"golang.org/x/sys/unix"
)

// ErrNotResumable means descriptors kept by an earlier controller do not
// lead to the recorded engine: the engine is gone, or a descriptor is
// missing or names another process. The caller must treat the engine as
// an orphan (or gone), never talk to it.
var ErrNotResumable = errors.New("the kept descriptors do not lead to the recorded engine")

// EnginePidFD returns a pidfd on the engine, checked to be the recorded
// process (pid, start time, inside the engine cgroup) while it is alive.
// The controller keeps it in the service manager's fd store with the
// pipes, so that a later controller can tell the engine it re-attaches to
// is this one and observe its exit without being its parent.
func (h *Handle) EnginePidFD() (*os.File, error) {
	c := h.Cohort
	within := c.engineCgroup()
	if c.Kind != proofs.KindScope {
		within = cgroupRef{}
	}
	m, err := openMember(c.PID, c.StartTime, within)
	if err != nil {
		return nil, fmt.Errorf("pidfd of the engine of %s: %w", c.Execution, err)
	}
	return os.NewFile(uintptr(m.fd), fmt.Sprintf("pidfd:%d", c.PID)), nil
}

// Kept are the descriptors of a live engine an earlier controller kept:
// its stdin write end, stdout and stderr read ends and a pidfd; and, when
// the launch made one (a confined engine), the write end of the held
// child's stop pipe (Handle.StopPipe), without which a resumed handle's
// stops end the engine's pid namespace with the engine and cut its
// tools' grace short.
type Kept struct {
	Stdin, Stdout, Stderr, PidFD, Stop *os.File
}

// Close closes every kept descriptor.
func (k Kept) Close() {
	for _, f := range []*os.File{k.Stdin, k.Stdout, k.Stderr, k.PidFD, k.Stop} {
		if f != nil {
			f.Close()
		}
	}
}

// Resume returns a handle on the live engine of cohort c through the
// descriptors an earlier controller kept. It checks, in an order that
// closes each race: the pidfd names c's engine pid (fdinfo), that process
// is alive (pidfd_send_signal 0, so the pid cannot be reused while we
// read), its start time is the recorded one, it is still alive after the
// read, the boot is the recorded one, and the stdio is a socket or a pipe. The
// handle's Done is closed when the pidfd polls readable (the engine
// exited; this process is not its parent, so its exit status is unknown).
// Stop, Term and Kill behave as after Reattach. On error nothing is
// closed: the caller owns k.
func (m *Manager) Resume(c Cohort, k Kept) (*Handle, error) {
	if k.Stdin == nil || k.Stdout == nil || k.PidFD == nil {
		return nil, fmt.Errorf("%w: execution %s: stdin, stdout and pidfd are all needed", ErrNotResumable, c.Execution)
	}
	if err := provesEngine(int(k.PidFD.Fd()), c); err != nil {
		return nil, fmt.Errorf("%w: execution %s: %w", ErrNotResumable, c.Execution, err)
	}
	for _, f := range []*os.File{k.Stdin, k.Stdout, k.Stderr} {
		if f == nil {
			continue
		}
		// A socket pair since stdio.go made them so; a pipe from an
		// earlier version of mosaic. f.Stat, not f.Fd: Fd would put the
		// engine's stdin in blocking mode for good, where a Close cannot
		// wake a write stuck on an engine that stopped reading.
		fi, err := f.Stat()
		if err != nil || fi.Mode()&(os.ModeSocket|os.ModeNamedPipe) == 0 {
			return nil, fmt.Errorf("%w: execution %s: kept %s is neither a socket nor a pipe (%v)", ErrNotResumable, c.Execution, f.Name(), err)
		}
	}
	h := &Handle{Stdin: k.Stdin, Stdout: k.Stdout, Stderr: k.Stderr, Cohort: c, m: m,
		done: make(chan struct{}), exitErr: errResumedExit}
	h.takeStopPipe(k.Stop)
	go h.watchPidFD(k.PidFD)
	m.reserveFDs()
	return h, nil
}

// provesEngine checks that the pidfd fd names c's engine, alive, in this
// boot: the one defence against re-attaching to the descriptors of a dead
// engine when nobody dropped them from the store (a pidfd polls EPOLLHUP,
// which makes the manager drop it, only once its process is reaped, and
// only on Linux ≥ 6.9).
func provesEngine(fd int, c Cohort) error {
	boot, err := procfs.BootID()
	if err != nil || boot != c.BootID {
		return fmt.Errorf("the engine ran in boot %s, this is %s (%v)", c.BootID, boot, err)
	}
	pid, err := pidfdPID(fd)
	if err != nil {
		return err
	}
	if pid != c.PID {
		return fmt.Errorf("the pidfd names pid %d, the engine is %d", pid, c.PID)
	}
	alive := func() error { return unix.PidfdSendSignal(fd, 0, nil, 0) }
	if err := alive(); err != nil {
		return fmt.Errorf("engine %d is gone (%v)", pid, err)
	}
	st, err := procfs.ReadStat(pid)
	if err != nil {
		return fmt.Errorf("engine %d: %w", pid, err)
	}
	// Alive after the read: the pid was not reused while it was read.
	if err := alive(); err != nil {
		return fmt.Errorf("engine %d exited while it was checked (%v)", pid, err)
	}
	if st.StartTime != c.StartTime {
		return fmt.Errorf("pid %d started at %d, the engine at %d", pid, st.StartTime, c.StartTime)
	}
	return nil
}

// StopPipe is what a controller keeps beside the pipes for a later one
// (Kept.Stop): the write end of the held child's stop pipe, nil when the
// handle has none. It stays the handle's: the caller must not close it.
func (h *Handle) StopPipe() *os.File { return h.stopNotice }

// HoldKept gives a Reattach handle, for the stop a restart resumes
// (K10), what an earlier controller kept of its engine: the stop pipe,
// held until a stop phase has signalled (letKeptGo), so that the TERM
// phase gives the tools their grace. The rest is closed: the fd store
// keeps its own copies of the engine's stdio until that stop has
// signalled (the controller's conclude), so the engine does not read EOF
// and end its pid namespace, and its tools with it, first.
func (h *Handle) HoldKept(k Kept) {
	stop := k.Stop
	k.Stop = nil
	k.Close()
	h.takeStopPipe(stop)
	h.mu.Lock()
	h.keptStop = h.stopNotice
	h.mu.Unlock()
}

// letKeptGo closes the stop pipe HoldKept held, once a stop phase
// signalled (or had nothing to signal): a later stop of the handle has
// no grace to give, as a Reattach handle never had.
func (h *Handle) letKeptGo() {
	h.mu.Lock()
	f := h.keptStop
	h.keptStop = nil
	h.mu.Unlock()
	if f != nil {
		f.Close()
	}
}

// takeStopPipe gives a resumed handle the stop pipe an earlier controller
// kept, only as what it must be: a pipe's write end. Anything else is
// closed, and the handle does without, as a Reattach handle does. The
// fd store held it for this service alone, and a write to a pipe whose
// reader is gone fails harmlessly (noticeStop).
func (h *Handle) takeStopPipe(f *os.File) {
	if f == nil {
		return
	}
	if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeNamedPipe != 0 && fdDo(f, writeEnd) == nil {
		h.stopNotice = f
		return
	}
	f.Close()
}

// fdDo runs fn on f's descriptor without f.Fd, which would make a
// non-blocking file blocking for good (noticeStop needs its deadline).
func fdDo(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// writeEnd says whether fd was opened for writing only.
func writeEnd(fd int) error {
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil {
		return err
	}
	if fl&unix.O_ACCMODE != unix.O_WRONLY {
		return errors.New("not a write end")
	}
	return nil
}

var errResumedExit = errors.New("the engine was re-attached after a controller restart: this process is not its parent, its exit status is unknown")

// watchPidFD closes done once the pidfd polls readable (the process
// exited), then closes the pidfd.
func (h *Handle) watchPidFD(f *os.File) {
	defer close(h.done)
	defer f.Close()
	if h.stopNotice != nil {
		defer h.stopNotice.Close() // as reap does
	}
	fds := []unix.PollFd{{Fd: int32(f.Fd()), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n > 0 {
			h.reapedAt = procfs.BoottimeNanos()
			return
		}
	}
}

// pidfdPID reads the pid a pidfd refers to from /proc/self/fdinfo: -1
// once the process is gone (Linux ≥ 5.15 writes it so).
func pidfdPID(fd int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", fd))
	if err != nil {
		return 0, fmt.Errorf("fdinfo of pidfd %d: %w", fd, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Pid:"); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, fmt.Errorf("fd %d is not a pidfd (no Pid: in fdinfo)", fd)
}
