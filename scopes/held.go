package scopes

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mosaic-agents/mosaic/internal/owner"
)

// roleEnv marks a re-exec of the current executable as a held child or an
// anchor. It is set only in the environment of those two children; the
// engine gets the environment from its Spec, never this variable.
const roleEnv = "MOSAIC_SCOPES_ROLE"

const (
	roleHeld   = "held"
	roleAnchor = "anchor"
	releaseFD  = 3 // the held child's end of the release pipe
	readyFD    = 4 // the held child's end of its ready pipe; fd 3 for an anchor
	// stopFD is a confined held child's end of its stop pipe, where it
	// reads whether the controller began a stop (runPID1). Only the
	// controller holds the other end: no process of the engine can reach
	// it (the held child's descriptors are closed to the engine, and the
	// capabilities it keeps fail the engine's ptrace checks on it),
	// where any of them can signal the held child.
	stopFD = 5
)

// release is what the controller writes to a held child, one JSON line,
// as soon as the child is started. The child makes Confine's mounts (if
// any), waits for placedLine (written once it is confirmed in the engine
// cgroup), finishes the confinement, answers with a confineReport line on
// its ready pipe and waits for "go"; only then does it run the engine. EOF
// at any point means "never run": the held child exits without exec'ing.
type release struct {
	Path    string       `json:"path"`
	Argv    []string     `json:"argv"`
	Env     []string     `json:"env"`
	Confine *confinePlan `json:"confine,omitempty"`
	// Dirs are Spec.Dirs, opened before the confinement and handed to
	// the engine, and Sealed Spec.Sealed (handed.go).
	Dirs   []string `json:"dirs,omitempty"`
	Sealed []string `json:"sealed,omitempty"`
}

// placedLine tells a held child that the launcher has confirmed it in
// the engine cgroup: a confined child makes its cgroup namespace, rooted
// where it is, only after it. The release comes before, as soon as the
// child is started, so a confined child makes its mounts while the
// scope's job runs.
const placedLine = "placed\n"

// goAhead is the line that lets a held child run the engine.
const goAhead = "go\n"

func init() {
	if os.Getenv(roleEnv) == roleHeld {
		// Keep the held child's main goroutine on the main thread: the
		// cgroup namespace it unshares is per thread, /proc/<pid>/ns/cgroup
		// shows the main thread's, and the engine is forked from it.
		runtime.LockOSThread()
	}
}

// MaybeRunHeld must be the first call in main (and in TestMain) of every
// program that launches engines with this package: the launcher re-executes
// the current executable (/proc/self/exe) as a held child. In such a child
// MaybeRunHeld never returns; in any other process it returns at once.
//
// A held child reads its release pipe (fd 3): the release, then, once the
// controller has moved it into the scope's engine cgroup and confirmed
// /proc/<pid>/cgroup, placed, then go (handshake.go); only then does it run
// the engine with the argv and environment it received. On EOF before go
// it exits 125 and the engine never runs. The scope's anchor (anchorScript, not this program) ignores
// SIGTERM, SIGINT and SIGHUP and sleeps until it is killed: it keeps the
// scope, and so the engine cgroup, in existence until a stop has observed
// that cgroup empty.
//
// Run by the name ToolShell ends in, it is the tool shell of a confined
// engine instead (runToolShell), and never returns either.
func MaybeRunHeld() {
	if len(os.Args) > 0 && isToolShellName(os.Args[0]) {
		runToolShell()
	}
	switch role := os.Getenv(roleEnv); role {
	case "":
		return
	case roleHeld:
		runHeld()
	default:
		fmt.Fprintf(os.Stderr, "mosaic: unknown %s=%q\n", roleEnv, role)
		os.Exit(125)
	}
}

// runHeld is the held child's life: announce the role, wait for the
// release, set up the confinement (its cgroup namespace once placed) and
// report it, wait for "go", run the engine. Any step that fails exits 125
// without running it.
func runHeld() {
	// Named for what it is in a cohort's membership (not "exe").
	os.WriteFile("/proc/self/comm", []byte("mosaic-held"), 0)
	ready := os.NewFile(readyFD, "ready")
	ready.Write([]byte(roleHeld))
	f := os.NewFile(releaseFD, "release")
	br := bufio.NewReader(f)
	r, ok := readRelease(br)
	if !ok {
		os.Exit(125)
	}
	placed := func() error { return readPlaced(br) }
	var rep confineReport
	handed, err := openHanded(r.Dirs)
	switch {
	case err != nil:
		// Reported once placed, as a confinement's failure is, where the
		// launcher reads it: a path of the caller's, not the kernel's.
		placed()
		rep.Error, rep.PathFault = err.Error(), true
	case r.Confine != nil:
		rep = confine(*r.Confine, placed)
		if rep.Error == "" && len(r.Sealed) > 0 {
			sealed, err := sealHanded(r.Dirs, handed, r.Sealed)
			rep.ReadOnly = append(rep.ReadOnly, sealed...)
			if err != nil {
				rep.Error, rep.PathFault = err.Error(), true
			}
		}
		if rep.Error == "" {
			if err := detachHanded(handed); err != nil {
				rep.Error = err.Error()
			}
		}
	case placed() != nil:
		os.Exit(125)
	}
	out, _ := json.Marshal(rep)
	ready.Write(append(out, '\n'))
	ready.Close()
	if rep.Error != "" {
		os.Exit(125)
	}
	// A probe stays until the launcher has read its namespaces.
	rest, err := io.ReadAll(br)
	f.Close()
	if err != nil || string(rest) != goAhead || r.Confine != nil && r.Confine.Probe {
		// The confinement was not confirmed: never run.
		os.Exit(125)
	}
	closeInherited()
	if r.Confine != nil {
		runPID1(r, handed)
	}
	if err := handOn(handed); err != nil {
		fmt.Fprintf(os.Stderr, "mosaic held child: %v\n", err)
		os.Exit(125)
	}
	err = syscall.Exec(r.Path, r.Argv, r.Env)
	fmt.Fprintf(os.Stderr, "mosaic held child: exec %s: %v\n", r.Path, err)
	os.Exit(127)
}

// readRelease reads the release line. EOF first means the controller gave
// up (or died) before it wrote one: nothing is set up, and no engine runs.
func readRelease(br *bufio.Reader) (release, bool) {
	var r release
	msg, err := br.ReadBytes('\n')
	if err != nil || len(msg) <= 1 {
		return r, false
	}
	if err := json.Unmarshal(msg, &r); err != nil || (r.Confine == nil || !r.Confine.Probe) && (r.Path == "" || len(r.Argv) == 0) {
		fmt.Fprintf(os.Stderr, "mosaic held child: bad release message: %v\n", err)
		return r, false
	}
	return r, true
}

// readPlaced reads the line that says the child is in the engine cgroup.
// EOF means the launcher gave up first.
func readPlaced(br *bufio.Reader) error {
	line, err := br.ReadString('\n')
	if err != nil {
		return err
	}
	if line != placedLine {
		return fmt.Errorf("read %q, want %q", truncate([]byte(line)), placedLine)
	}
	return nil
}

// closeInherited marks every descriptor above stderr close-on-exec:
// nothing but stdin, stdout and stderr may leak into the engine.
func closeInherited() {
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		for fd := 3; fd < 1024; fd++ {
			unix.CloseOnExec(fd)
		}
	}
}

// heldChild is a started held child and the write end of its release pipe.
type heldChild struct {
	cmd     *exec.Cmd
	release *os.File
	ready   *os.File // read end of the ready pipe
	stop    *os.File // write end of the stop pipe (confined only, stopFD)
	// closeFault, tests only, is what the release pipe's close returns
	// after the go-ahead was written (faults.goAheadClose).
	closeFault func() error
}

// errNotWired: the re-executed program did not run MaybeRunHeld first.
var errNotWired = errors.New("the re-executed program did not enter its held role: call scopes.MaybeRunHeld() first thing in main (and TestMain)")

// errAnchorSilent: the anchor (anchorScript) never said it was ready.
var errAnchorSilent = errors.New("the scope's anchor (/bin/sh, then sleep infinity) did not say it was ready: check that /bin/sh and sleep run")

// awaitReady reads the child's role from its ready pipe (closed by the
// caller afterwards), failing after the deadline.
func awaitReady(f *os.File, role string, deadline time.Time) error {
	f.SetReadDeadline(deadline)
	b := make([]byte, 16)
	n, err := io.ReadFull(f, b[:len(role)])
	if err != nil || string(b[:n]) != role {
		silent := errNotWired
		if role == roleAnchor {
			silent = errAnchorSilent
		}
		return fmt.Errorf("%w (read %q: %v)", silent, b[:n], err)
	}
	return nil
}

// startHeld starts a held child with the engine's stdio and working
// directory, in a session of its own (so in its own process group, and
// with no controlling terminal: a launcher run from a shell, `serve
// --listen`, must not hand the engine its terminal through /dev/tty), and
// with confined in its own user, mount, pid and IPC namespaces
// (confinedAttr) and a stop pipe (stopFD). It does not run the engine yet.
func startHeld(dir string, stdin, stdout, stderr *os.File, confined bool) (*heldChild, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	readyR, readyW, err := os.Pipe()
	if err != nil {
		w.Close()
		return nil, err
	}
	defer readyW.Close()
	extra := []*os.File{r, readyW}
	var stopW *os.File
	if confined {
		stopR, sw, err := os.Pipe()
		if err != nil {
			w.Close()
			readyR.Close()
			return nil, err
		}
		defer stopR.Close()
		stopW, extra = sw, append(extra, stopR)
	}
	cmd := &exec.Cmd{
		Path:        "/proc/self/exe",
		Args:        []string{"mosaic-held"},
		Env:         []string{roleEnv + "=" + roleHeld},
		Dir:         dir,
		Stdin:       stdin,
		Stdout:      stdout,
		Stderr:      stderr,
		ExtraFiles:  extra,
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	if confined {
		cmd.SysProcAttr = confinedAttr()
	}
	if err := cmd.Start(); err != nil {
		w.Close()
		readyR.Close()
		if stopW != nil {
			stopW.Close()
		}
		return nil, fmt.Errorf("start held child: %w", err)
	}
	return &heldChild{cmd: cmd, release: w, ready: readyR, stop: stopW}, nil
}

// sendRelease writes the release line: the held child sets up the
// confinement's mounts (if r.Confine) and waits for sendPlaced. It may
// be written before the child reads anything: a release larger than the
// pipe holds waits for the child's read until the deadline.
func (h *heldChild) sendRelease(r release, deadline time.Time) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	h.release.SetWriteDeadline(deadline)
	defer h.release.SetWriteDeadline(time.Time{}) // not the later lines'
	if _, err = h.release.Write(append(b, '\n')); err != nil {
		return h.unread(err)
	}
	return nil
}

// unread names why a release was not taken: a held child says its role
// before it reads, so a program that never entered it (main without
// MaybeRunHeld) is told so, not left with the write's timeout or EPIPE.
// The role read here is the launch's last: it fails either way.
func (h *heldChild) unread(err error) error {
	if rerr := awaitReady(h.ready, roleHeld, time.Now().Add(roleGrace)); rerr != nil {
		return fmt.Errorf("%w; write: %w", rerr, err)
	}
	return err
}

// roleGrace is how long unread waits for the role a child may still be
// writing as the release's write failed (EPIPE can come first).
const roleGrace = 100 * time.Millisecond

// sendPlaced tells the held child it is confirmed in its cohort's cgroup:
// it finishes its confinement and answers on its ready pipe.
func (h *heldChild) sendPlaced() error {
	_, err := h.release.Write([]byte(placedLine))
	return err
}

// awaitReport reads the held child's answer to its release.
func (h *heldChild) awaitReport(deadline time.Time) (confineReport, error) {
	var rep confineReport
	b, err := readLine(h.ready, deadline)
	if err != nil {
		return rep, fmt.Errorf("held child %d gave no confinement report: %w", h.cmd.Process.Pid, err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		return rep, fmt.Errorf("held child %d: confinement report %q: %w", h.cmd.Process.Pid, truncate(b), err)
	}
	if rep.Error != "" && rep.PathFault {
		return rep, fmt.Errorf("held child %d: %w: %s", h.cmd.Process.Pid, ErrCoverPath, rep.Error)
	}
	if rep.Error != "" {
		return rep, fmt.Errorf("held child %d: %s", h.cmd.Process.Pid, rep.Error)
	}
	return rep, nil
}

// releaseEngine lets the held child run the engine.
//
// An error means the child never runs the engine: the go-ahead is a few
// bytes, written to a pipe whole or not at all, and the write fails only
// with EPIPE, when no process holds the read end any more: the held child
// has exited (it lets go of the pipe only then, before the go-ahead's
// EOF) without reading it, and nothing forked from it (it forks only
// after the go-ahead), so nothing can read it later either. Once the
// go-ahead is written the engine is released, whatever the close says:
// close(2) lets go of the descriptor even when it fails, the child reads
// the go-ahead and EOF and runs the engine, and the launch must hand over
// its handle rather than undo a launch whose engine runs.
func (h *heldChild) releaseEngine() error {
	h.ready.Close()
	if _, err := h.release.Write([]byte(goAhead)); err != nil {
		h.release.Close()
		return err
	}
	_ = h.closeRelease() // released all the same: see above
	return nil
}

// closeRelease closes the release pipe's write end (what the close
// returns is faults.goAheadClose's in tests).
func (h *heldChild) closeRelease() error {
	err := h.release.Close()
	if h.closeFault != nil {
		err = h.closeFault()
	}
	return err
}

// abort closes the release pipe without a message and kills the child.
func (h *heldChild) abort() {
	h.ready.Close()
	h.release.Close()
	if h.stop != nil {
		h.stop.Close()
	}
	h.cmd.Process.Kill()
	h.cmd.Wait()
}

// anchorScript is the anchor: it ignores the signals a stop or a terminal
// sends (an ignored signal stays ignored across exec), says it is ready on
// fd 3 and becomes sleep, $1 (anchorSleep), saying ready only once that
// is there to exec: an anchor that exited at once would leave the scope
// to end under a stop that has not observed the engine cgroup. Two small
// programs, where a re-executed Go program paid the runtime's start and
// every package's init on the launch's two CPUs (3.5-4.6 ms of init in
// mosaicctl).
const anchorScript = `trap '' TERM INT HUP PIPE; [ -x "$1" ] || exit 127; printf ` + roleAnchor + ` >&3; exec 3>&-; exec "$1" infinity`

// anchorSleeps are where the anchor's sleep is looked for: the usual
// places, and NixOS's system profile (it has neither /usr/bin/sleep nor
// /bin/sleep).
var anchorSleeps = []string{"/usr/bin/sleep", "/bin/sleep", "/run/current-system/sw/bin/sleep"}

// anchorSleep finds the sleep the anchor becomes, never by PATH: the
// anchor runs outside the engine's namespaces and cgroup, and a PATH
// holds directories the user, and so a confined engine, can write
// (~/.local/bin, ~/bin), where a sleep the engine put there would run
// unconfined at the next launch. Only a file the user cannot replace
// (owner.BeyondUser) is taken.
func anchorSleep() (string, error) {
	for _, p := range anchorSleeps {
		if owner.BeyondUser(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("start scope anchor: no sleep program the user cannot replace at %s (install coreutils): the anchor that holds the scope open becomes one", strings.Join(anchorSleeps, ", "))
}

// startAnchor starts an anchor process in its own session, with no stdio,
// and returns the read end of its ready pipe.
func startAnchor() (*exec.Cmd, *os.File, error) {
	sleep, err := anchorSleep()
	if err != nil {
		return nil, nil, err
	}
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	defer readyW.Close()
	cmd := &exec.Cmd{
		Path:        "/bin/sh",
		Args:        []string{"mosaic-anchor", "-c", anchorScript, "mosaic-anchor", sleep},
		Env:         []string{"PATH=/usr/bin:/bin"},
		Dir:         "/",
		ExtraFiles:  []*os.File{readyW},
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	if err := cmd.Start(); err != nil {
		readyR.Close()
		return nil, nil, fmt.Errorf("start scope anchor: %w", err)
	}
	return cmd, readyR, nil
}

// truncate bounds what an error quotes of a report.
func truncate(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}
