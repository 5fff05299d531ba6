package scopes

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"iter"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mosaic-agents/mosaic/internal/devices"
	"github.com/mosaic-agents/mosaic/internal/procfs"
	"github.com/mosaic-agents/mosaic/internal/xdg"
	"github.com/mosaic-agents/mosaic/proofs"
)

// ErrNamespacesUsedUp: the kernel refused the held child's namespaces
// because a limit of the user's is used up (ENOSPC: user.max_user_namespaces,
// user.max_ipc_namespaces, …), which processes of the user, an engine's
// tools among them, can do on purpose. Unlike namespaces the host refuses,
// it never lets an engine run unconfined: the launch fails.
var ErrNamespacesUsedUp = errors.New("a namespace limit of this user is used up")

// heldStartError words why a confined held child did not start.
func heldStartError(err error) error {
	if errors.Is(err, unix.ENOSPC) {
		return fmt.Errorf("%w: %w: %w (processes of this user hold every namespace user.max_user_namespaces, user.max_ipc_namespaces or another user.max_*_namespaces allows: find them with `lsns`; no engine is launched unconfined instead)", ErrConfinement, ErrNamespacesUsedUp, err)
	}
	return fmt.Errorf("%w: %w (user namespaces refused: on Ubuntu check kernel.apparmor_restrict_unprivileged_userns, elsewhere user.max_user_namespaces and kernel.unprivileged_userns_clone)", ErrConfinement, err)
}

// ErrConfinement: the held child could not set up the engine's
// confinement although the probe said it could; the engine never ran.
var ErrConfinement = errors.New("engine confinement could not be set up")

// ErrCoverPath: a path the engine's confinement covers (a mask, a private
// directory, a parent kept in place) could not be covered. Those are the
// user's files, which an engine can change (a mode of 000, a link loop),
// so it never makes confinement count as unavailable, which would start
// the next engines unconfined: the launch fails, closed, naming the path.
var ErrCoverPath = errors.New("a path the engine's confinement covers could not be covered; fix its mode or link (an engine may have changed it) and launch again")

// confinePlan is what a held child sets up in its own namespaces before
// the engine may run. The launcher computes it from its own environment and
// mount table: the held child knows nothing but this.
type confinePlan struct {
	// Masks are made unreachable: an empty read-only tmpfs over a
	// directory, /dev/null over anything else.
	Masks []string `json:"masks"`
	// Private are directories a fresh, writable tmpfs of the engine's own
	// (0700) replaces: the user's servers' sockets there are out of
	// reach, and the engine's own server can still make its socket there.
	Private []string `json:"private,omitempty"`
	// Runtime are the user's runtime directories, each replaced by a
	// fresh, writable tmpfs of the engine's own (privateRuntime).
	Runtime []string `json:"runtime,omitempty"`
	// Keep are Spec.Keep's directories, under a mask or a runtime
	// directory, bound back into it.
	Keep []string `json:"keep,omitempty"`
	// ReadOnly are bound read-only onto themselves, and Writable, files
	// below them, bound back writable (Spec.ReadOnly, Spec.Writable).
	ReadOnly []string `json:"read_only,omitempty"`
	Writable []string `json:"writable,omitempty"`
	// Devices are Spec.Devices, below /dev (devicePaths).
	Devices []string `json:"devices,omitempty"`
	// CgroupMount is where cgroup2 is mounted afresh from inside the new
	// cgroup namespace, so only the engine's subtree is reachable there.
	CgroupMount string `json:"cgroup_mount"`
	// Probe: set everything up, report, exit; no engine.
	Probe bool `json:"probe,omitempty"`
	// mountinfo is the launcher's mount table the plan was made from,
	// for the aliases of what the launch adds to it (planIf).
	mountinfo string
}

// confineReport is the held child's answer to a release, one JSON line on
// its ready pipe.
type confineReport struct {
	Confined bool     `json:"confined"`
	Error    string   `json:"error,omitempty"`
	Masked   []string `json:"masked,omitempty"`
	Absent   []string `json:"absent,omitempty"` // mask targets that did not exist
	ReadOnly []string `json:"read_only,omitempty"`
	// Devices are the plan's devices the engine's /dev holds.
	Devices []string `json:"devices,omitempty"`
	// Scoped and Unscoped: the Landlock scopes set on the thread the
	// engine is forked from, or why none (scopeDomain).
	Scoped   []string `json:"scoped,omitempty"`
	Unscoped string   `json:"unscoped,omitempty"`
	// ToolShell is where the engine finds the tool shell (toolshell.go),
	// or Unnested says why it has none.
	ToolShell string `json:"tool_shell,omitempty"`
	Unnested  string `json:"unnested,omitempty"`
	// PathFault: Error is about a path the plan covers (a pathFault), not
	// about the kernel.
	PathFault bool `json:"path_fault,omitempty"`
	// CgroupSelf is the 0:: line of /proc/self/cgroup after the cgroup
	// namespace was made: "/" when it is rooted at the child's cgroup.
	CgroupSelf string `json:"cgroup_self,omitempty"`
}

// confinedAttr makes the held child in new user, mount, pid and IPC
// namespaces at clone time (unshare(CLONE_NEWUSER) is refused to a multithreaded
// process). The user namespace maps only the user's own uid and gid, to
// themselves, with setgroups denied, so what the agent writes keeps the
// user's ownership; CAP_SYS_ADMIN is kept across the held child's exec as an
// ambient capability (its uid is not 0 inside) so it can mount, and
// CAP_DAC_READ_SEARCH so it reaches every path it covers whatever their
// modes (an engine's chmod 000 of ~/.local/share must not keep the next
// mask from its place); both are cleared before the engine's exec. The
// cgroup namespace comes later: it must be rooted at the engine cgroup
// the child is moved into.
func confinedAttr() *syscall.SysProcAttr {
	uid, gid := os.Getuid(), os.Getgid()
	return &syscall.SysProcAttr{
		Setsid:                     true,
		Cloneflags:                 unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWIPC,
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}},
		GidMappingsEnableSetgroups: false,
		AmbientCaps:                []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_DAC_READ_SEARCH},
	}
}

// planConfinement computes the masks and the cgroup view from this
// process's environment and mount table, hiding the directories in hide
// as well (Spec.Hide).
func planConfinement(hide ...string) (confinePlan, error) {
	var masks maskSet
	dirs, err := hiddenDirs(hide)
	if err != nil {
		return confinePlan{}, err
	}
	masks.add(dirs...)
	rts := runtimeDirs()
	masks.add(runtimeMasks(rts)...)
	masks.add(busMasks()...)
	masks.add(managerDirs()...)
	// The system bus: privileged daemons act on a user's request there
	// (polkit's allow_active: power off, mount, install packages), which
	// no proof about the cohort covers.
	masks.add(systemBus)
	// journald's sockets: every unit of the user manager shares one rate
	// limit bucket (user@UID.service), so an engine that floods them could
	// make journald drop the controller's decisions. The engine's stderr
	// still reaches the journal through the controller.
	masks.add(journalSockets)
	// PID 1's notification socket (0777): every datagram from a process
	// that is no unit's main process makes PID 1 journal a warning, at
	// its own priority and outside every user's rate limit, so a tool
	// sending them fast fills the system journal until journald rotates
	// the oldest files out, the controller's decisions among them.
	masks.add(systemNotify)
	// The display's sockets in the shared /tmp: Landlock's scope keeps
	// the abstract X11 socket out (landlock.go), but clients fall back to
	// the file-system one, and XTEST on it types into the user's
	// terminals. Each is made if missing (1777, as systemd-tmpfiles makes
	// them), so that an X server started after the launch (Xvfb, a VNC
	// session) puts its socket where the engine cannot see: else a tool
	// could make the directory in the shared /tmp, and the server would
	// use it.
	masks.add(makeDisplayDirs()...)
	// Each of these is masked, as are the runtime and private directories,
	// wherever else a mount shows the same file (aliases, below); the
	// devtmpfs and cgroup mounts next are found by mount already.
	byPath := slices.Clone(masks)
	// The engine gets a /dev of its own (privateDev); every other mount
	// of the devtmpfs shows the user's devices all the same (the FUSE
	// device among them: a tool, root of a user and mount namespace of
	// its own, could mount a FUSE filesystem, and a process that holds
	// the connection's /dev/fuse and reads a request the server never
	// answers sleeps through SIGKILL until the connection is aborted,
	// which no stop does: killUnfrozen), so each is masked.
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return confinePlan{}, fmt.Errorf("%w: read mountinfo: %w", ErrConfinement, err)
	}
	masks.add(devMounts(string(mounts))...)
	// fusectl shows every FUSE connection of the machine, and each one's
	// abort belongs to the mount's owner: the user's sshfs, rclone mount,
	// gvfs, document portal. A tool that writes it ends the user's mount
	// (every access to it fails ENOTCONN, its server exits); the engine
	// has no FUSE mount of its own to abort.
	masks.add(fusectlMounts(string(mounts))...)
	const cgroupView = "/sys/fs/cgroup"
	masks.add(otherCgroupMounts(string(mounts), cgroupView)...)
	private := muxDirs()
	// The engine gets ptys, shared memory and queues of its own at their
	// usual places (privatePTYs, privateShm, privateMqueue): the user's
	// stay reachable wherever else a mount shows them (/dev bound for a
	// chroot), so those places are masked too.
	masks.add(aliases(string(mounts), slices.Concat(byPath, rts, private, []string{devPTS, devShm, devMqueue}))...)
	return confinePlan{Masks: masks, Runtime: rts, Private: private, CgroupMount: cgroupView, mountinfo: string(mounts)}, nil
}

// maskSet is a list of absolute, cleaned paths, each once, in the order
// first added.
type maskSet []string

func (s *maskSet) add(ps ...string) {
	for _, p := range ps {
		if p != "" && path.IsAbs(p) && !slices.Contains(*s, path.Clean(p)) {
			*s = append(*s, path.Clean(p))
		}
	}
}

// hiddenDirs makes each directory of hide that is missing (0700, parents
// too) so that the mask covers it from the start: a directory created after
// the launch would otherwise be reachable until the next one. Anything else
// there (a file the caller made, a Claude env file; a link) is masked as it
// is, where it leads (confineReport.cover).
func hiddenDirs(hide []string) ([]string, error) {
	var out []string
	for _, d := range hide {
		if !path.IsAbs(d) {
			return nil, fmt.Errorf("%w: hidden directory %q is not absolute", ErrConfinement, d)
		}
		if fi, err := os.Lstat(d); err == nil && !fi.IsDir() {
			out = append(out, d)
			continue
		}
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("%w: hidden directory: %w", ErrConfinement, err)
		}
		out = append(out, d)
	}
	return out, nil
}

// runtimeMasks are the user's sockets in each runtime directory rts
// (runtimeDirs). The engine's private runtime directory hides them as
// well; they are masked all the same, so the proof names each.
func runtimeMasks(rts []string) []string {
	var out []string
	for _, rt := range rts {
		out = append(out, path.Join(rt, "bus"), // the user's D-Bus: systemd-run --user, notifications, secrets
			path.Join(rt, "systemd")) // the user manager's private socket
		// mosaic's own: every conversation's controller socket. Made
		// here if missing, so a controller started later is masked too.
		_ = os.Mkdir(path.Join(rt, "mosaic"), 0o700)
		out = append(out, path.Join(rt, "mosaic"))
	}
	return out
}

// muxDirs are the socket directories of the user's terminal
// multiplexers, for the engine to get private ones in their place
// (confinePlan.Private): a tool that reaches the user's tmux or screen
// server has it start a process outside the cohort (tmux new-window),
// which then counts as the user's own, or types into the user's panes
// (send-keys), the terminal that holds control of this conversation
// among them; a tool's own tmux still works, its server inside the
// cohort. tmux's directory (in /tmp where a tmux without $TMUX_TMPDIR
// looks, in $TMUX_TMPDIR, and in $XDG_RUNTIME_DIR, where shells often
// point $TMUX_TMPDIR and a user service does not see it) is made if
// missing, 0700 as tmux makes it, so a server started later is covered
// too; one that is not a directory of this user is no server of the
// user's (tmux refuses it) and is left alone. screen's $SCREENDIR is
// made if missing the same way; its default, S-USER in one of
// screenRoots, is root's to make, so the root is covered whole when it
// exists: a server the user starts after the launch makes its directory
// where the engine cannot see it, and a tool's own screen makes one in
// the engine's tmpfs.
func muxDirs() []string { return muxDirsMade(true) }

// muxDirsMade is muxDirs, making the directories only where made is set
// (else those that are there).
func muxDirsMade(made bool) []string {
	uid := strconv.Itoa(os.Getuid())
	var out []string
	tmux := []string{"/tmp", os.Getenv("TMUX_TMPDIR")}
	if d, err := xdg.RuntimeDir(); err == nil {
		tmux = append(tmux, d)
	}
	for _, d := range tmux {
		if d == "" || !path.IsAbs(d) {
			continue
		}
		p := path.Join(d, "tmux-"+uid)
		if made {
			_ = os.Mkdir(p, 0o700)
		}
		if ownDir(p) && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	if d := os.Getenv("SCREENDIR"); d != "" && path.IsAbs(d) {
		if made {
			_ = os.Mkdir(d, 0o700)
		}
		if ownDir(d) && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	for _, d := range screenRoots {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() && !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

// screenRoots are where screen keeps each user's socket directory when
// $SCREENDIR is not set: /run/screen as Debian and Fedora build it,
// /tmp/uscreens and /tmp/screens where a build names no socket
// directory (Nix among them). A variable for tests only.
var screenRoots = []string{"/run/screen", "/tmp/uscreens", "/tmp/screens"}

// ownDir says whether p is a directory (not a link to one) of this user.
func ownDir(p string) bool {
	fi, err := os.Lstat(p)
	if err != nil || !fi.IsDir() {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Getuid()
}

// busMasks are the socket paths of the D-Bus addresses in the
// environment.
func busMasks() []string {
	var out []string
	for _, env := range []string{"DBUS_SESSION_BUS_ADDRESS", "DBUS_SYSTEM_BUS_ADDRESS"} {
		for _, a := range strings.Split(os.Getenv(env), ";") {
			if p, ok := strings.CutPrefix(a, "unix:path="); ok {
				p, _, _ = strings.Cut(p, ",")
				out = append(out, p)
			}
		}
	}
	return out
}

// mountEntry is what a mountinfo line says of one mount: the root of the
// filesystem it shows, where, and the filesystem's type.
type mountEntry struct {
	dev, root, point, fstype string // dev: major:minor of the filesystem
}

// mountEntries yields the mounts of mountinfo, paths unescaped.
func mountEntries(mountinfo string) iter.Seq[mountEntry] {
	return func(yield func(mountEntry) bool) {
		for line := range strings.SplitSeq(mountinfo, "\n") {
			pre, post, ok := strings.Cut(line, " - ")
			f, pf := strings.Fields(pre), strings.Fields(post)
			if !ok || len(f) < 5 || len(pf) < 1 {
				continue
			}
			if !yield(mountEntry{dev: f[2], root: unescapeMount(f[3]), point: unescapeMount(f[4]), fstype: pf[0]}) {
				return
			}
		}
	}
}

// otherCgroupMounts lists every cgroup hierarchy mounted outside view in
// mountinfo: the engine gets a fresh cgroup2 mount at view, and nothing
// else.
func otherCgroupMounts(mountinfo, view string) []string {
	return mountPoints(mountinfo, func(m mountEntry) bool {
		return (m.fstype == "cgroup" || m.fstype == "cgroup2") && !atOrBelow(m.point, view)
	})
}

// mountPoints lists where mountinfo mounts what keep takes.
func mountPoints(mountinfo string, keep func(mountEntry) bool) []string {
	var out []string
	for m := range mountEntries(mountinfo) {
		if keep(m) {
			out = append(out, m.point)
		}
	}
	return out
}

// aliases lists the other places mountinfo shows each of paths: another
// mount of the filesystem that holds it (a bind of /home elsewhere, a
// second mount of a volume, a btrfs top level) reaches the same files
// under another path, and a mask covers a path, not the files. Such a
// place counts only when it names the very same file (device and inode),
// so nothing else is covered by mistake: not a path a later mount hides,
// not a file of another filesystem at the same name.
func aliases(mountinfo string, paths []string) []string {
	var mounts []mountEntry
	for m := range mountEntries(mountinfo) {
		mounts = append(mounts, m)
	}
	var out []string
	for _, p := range paths {
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Lstat(real, &st) != nil {
			continue
		}
		// The mount real is on: the last one at the longest mount point
		// above it (a later mount at a point hides an earlier one).
		var on *mountEntry
		for i := range mounts {
			m := &mounts[i]
			if atOrBelow(real, m.point) && (on == nil || len(m.point) >= len(on.point)) {
				on = m
			}
		}
		if on == nil {
			continue
		}
		inFS := path.Join(on.root, strings.TrimPrefix(real, on.point))
		for _, m := range mounts {
			if m.dev != on.dev || !atOrBelow(inFS, m.root) {
				continue
			}
			alias := path.Join(m.point, strings.TrimPrefix(inFS, m.root))
			var ast unix.Stat_t
			if alias == real || slices.Contains(out, alias) || unix.Lstat(alias, &ast) != nil || ast.Dev != st.Dev || ast.Ino != st.Ino {
				continue
			}
			out = append(out, alias)
		}
	}
	return out
}

// atOrBelow says whether the clean path p is dir or lies under it.
func atOrBelow(p, dir string) bool {
	return dir == "/" || p == dir || strings.HasPrefix(p, dir+"/")
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space, …).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// confine runs in the held child, in its new user, mount, pid and IPC
// namespaces with CAP_SYS_ADMIN there, on the main thread (locked by this
// package's init): it makes the masks and a fresh /proc for the new pid
// namespace while the launcher creates the scope and moves the child,
// then waits for placed (the launcher's word that the child is in the
// engine cgroup, confirmed) and makes a cgroup namespace rooted at the
// child's present cgroup and a cgroup2 mount from inside it. Each step
// closes a path out:
//
//   - mount propagation private: nothing mounted here leaks out, and a
//     remount of the runtime directory outside cannot bring the sockets back;
//   - masks: no systemd-run --user, no D-Bus activation, no new engines from
//     mosaic's own controllers;
//   - /proc: /proc/<outside pid>/root would reach every masked socket
//     through a same-uid process outside, and ptrace of those processes
//     needs their pids;
//   - cgroup namespace and view: cgroup.procs of any cgroup outside the
//     engine's subtree cannot be named, so no move out of the cohort, with
//     or without nsdelegate.
//
// The engine (uid not 0 inside, no ambient capabilities) cannot undo any
// of it; a nested user and mount namespace gets every one of these mounts
// locked (MNT_LOCKED), so umount there fails too.
func confine(plan confinePlan, placed func() error) confineReport {
	var rep confineReport
	wd, err := rep.mountView(plan)
	// A set-up that failed waits to be placed too, so its report comes
	// where the launcher reads it and the launch fails with its cause.
	if perr := placed(); err == nil && perr != nil {
		err = fmt.Errorf("never told it is in the engine cgroup: %v", perr)
	}
	if err == nil {
		err = rep.enterCgroup(plan, wd)
	}
	if err != nil {
		rep.Error, rep.PathFault = err.Error(), errors.As(err, new(pathFault))
	}
	return rep
}

// pathFault is a path the plan covers that could not be covered: the
// user's files, which an engine of theirs can change (a mode, a link
// loop), not the kernel. The launch fails closed on it (ErrCoverPath),
// and the host's confinement does not count as unavailable.
type pathFault struct{ error }

// mountView makes the engine's mount namespace what the engine sees: the
// masks, its own /dev and a fresh /proc. It returns the working directory
// to enter again once everything is mounted. It needs no cgroup, so it
// runs while the scope's job does.
func (rep *confineReport) mountView(plan confinePlan) (string, error) {
	// Not ptrace-able, even by a same-uid process that had the
	// capabilities it keeps until the engine's exec.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return "", fmt.Errorf("prctl(PR_SET_DUMPABLE): %v", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return "", fmt.Errorf("make / private: %v", err)
	}
	// The working directory the launcher started this child in was
	// entered by path before any mount here, so it stays where that path
	// led then, under whatever is mounted over it below: a project that a
	// tool of the last engine swapped for a link to /dev or to the
	// runtime directory would leave the engine working in the host's
	// devtmpfs (every device by a relative path) or the user's runtime
	// directory (every server there). It is entered again by its path
	// once everything is mounted (workdir).
	wd, err := unix.Getwd()
	if err != nil {
		return "", pathFault{fmt.Errorf("working directory: %v", err)}
	}
	self, selfErr := openSelf() // the tool shell's source, before the masks
	if selfErr == nil {
		defer unix.Close(self)
	}
	kept, err := openKept(plan.Keep)
	if err != nil {
		return "", pathFault{err}
	}
	defer kept.close()
	// Opened before the read-only binds, so each is bound back from the
	// writable mount it was on.
	writable, err := openWritable(plan.Writable, plan.ReadOnly, slices.Concat(plan.Masks, plan.Runtime, plan.Private))
	if err != nil {
		return "", pathFault{err}
	}
	defer writable.close()
	if err := fixAncestors(plan.Masks, plan.Runtime, plan.Private, plan.Keep, plan.ReadOnly); err != nil {
		return "", pathFault{err}
	}
	if err := rep.cover(plan.Masks, "mask", kept.maskKeeping, &rep.Masked); err != nil {
		return "", pathFault{err}
	}
	if err := rep.cover(plan.Runtime, "private runtime directory", kept.privateKeeping, &rep.Masked); err != nil {
		return "", pathFault{err}
	}
	if err := rep.cover(plan.Private, "private", privateDir, &rep.Masked); err != nil {
		return "", pathFault{err}
	}
	var readOnlyDone []string
	if err := rep.cover(plan.ReadOnly, "read-only", readOnly, &readOnlyDone); err != nil {
		return "", pathFault{err}
	}
	rep.ReadOnly = unlinked(readOnlyDone)
	if err := writable.bindBack(); err != nil {
		return "", pathFault{err}
	}
	devices, absent, err := privateDev(plan.Devices)
	if err != nil {
		return "", err
	}
	rep.Devices, rep.Absent = devices, append(rep.Absent, absent...)
	rep.Masked = append(rep.Masked, devDir)
	// The tool shell, while /dev is still writable. Where it cannot be
	// made the engine runs its own shell, its tools not nested, as the
	// report says: a kernel's want, not the user's files.
	if rep.Unnested = toolsNestable(); rep.Unnested == "" {
		if selfErr == nil {
			selfErr = bindToolShell(self)
		}
		if selfErr != nil {
			rep.Unnested = selfErr.Error()
		} else {
			rep.ToolShell = ToolShell
		}
	}
	// The engine's own ptys, shared memory and queues, on the directories
	// privateDev made. A host that refuses one (a container's seccomp
	// profile) leaves its directory empty in the read-only /dev: tools go
	// without, and nothing of the user's is there either.
	for _, p := range []struct {
		path string
		how  func(string) error
	}{{devPTS, privatePTYs}, {devShm, privateShm}, {devMqueue, privateMqueue}} {
		if err := p.how(p.path); err != nil {
			rep.Absent = append(rep.Absent, p.path)
			continue
		}
		rep.Masked = append(rep.Masked, p.path)
	}
	if err := sealDev(); err != nil {
		return "", err
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return "", fmt.Errorf("mount a fresh /proc: %v", err)
	}
	if left := kept.unbound(); len(left) > 0 {
		return "", pathFault{fmt.Errorf("kept paths %v are under no mask or runtime directory", left)}
	}
	return wd, nil
}

// enterCgroup makes a cgroup namespace rooted at the child's cgroup and
// mounts cgroup2 from inside it, once the child is placed in the engine
// cgroup: a cgroup namespace is rooted where its maker is when it is
// made. Then it enters wd again and the Landlock domain.
func (rep *confineReport) enterCgroup(plan confinePlan, wd string) error {
	if err := unix.Unshare(unix.CLONE_NEWCGROUP); err != nil {
		return fmt.Errorf("unshare(CLONE_NEWCGROUP): %v", err)
	}
	// The same cgroup2 superblock cannot be mounted right on top of its own
	// root (EBUSY): an empty tmpfs goes between, and hides whatever else
	// was mounted below (cgroup v1 hierarchies of a hybrid host) as well.
	if err := mask(plan.CgroupMount); err != nil {
		return fmt.Errorf("cover %s: %v", plan.CgroupMount, err)
	}
	if err := unix.Mount("cgroup2", plan.CgroupMount, "cgroup2", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount cgroup2 on %s from inside the cgroup namespace: %v", plan.CgroupMount, err)
	}
	cg, err := procfs.Cgroup2(os.Getpid())
	if err != nil {
		return fmt.Errorf("read /proc/self/cgroup: %v", err)
	}
	rep.CgroupSelf = cg
	if cg != "/" {
		return fmt.Errorf("cgroup namespace not rooted at the child's cgroup: /proc/self/cgroup says %q", cg)
	}
	if err := unix.Chdir(wd); err != nil {
		return pathFault{fmt.Errorf("working directory %s, entered again through the engine's mounts: %v", wd, err)}
	}
	// Last: a domain forbids nothing set up above, but it is what the
	// report says the engine runs in.
	rep.Scoped, rep.Unscoped = scopeDomain()
	rep.Confined = true
	return nil
}

// cover applies how to each of paths that exists, by its resolved path,
// and notes it in done; one that does not exist is noted absent.
func (rep *confineReport) cover(paths []string, what string, how func(real string) error, done *[]string) error {
	for _, p := range paths {
		real, err := filepath.EvalSymlinks(p)
		if errors.Is(err, os.ErrNotExist) {
			// A link the user could have made that leads nowhere is a
			// tool's way around the mask: the directory it would make at
			// the link's target later is reached through p outside.
			if links := ReplaceableLinks(p); len(links) > 0 {
				return fmt.Errorf("%s %s: the link %s leads nowhere", what, p, strings.Join(links, ", "))
			}
			rep.Absent = append(rep.Absent, p)
			continue
		}
		if err == nil {
			err = how(real)
		}
		if err != nil {
			return fmt.Errorf("%s %s: %v", what, p, err)
		}
		*done = append(*done, p)
	}
	return nil
}

// privateDir puts a fresh, writable tmpfs of the engine's own over p
// (confinePlan.Private).
func privateDir(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	return unix.Mount("mosaic-private", p, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC,
		fmt.Sprintf("size=1m,nr_inodes=256,mode=%04o", dirMode(fi)))
}

// makeDisplayDirs makes each of displayDirs that is missing, sticky and
// writable by all as X servers expect, and returns them.
func makeDisplayDirs() []string {
	for _, d := range displayDirs {
		if err := os.Mkdir(d, os.ModeSticky|0o777); err == nil {
			openChmod(d, unix.S_ISVTX|0o777) // past the umask
		}
	}
	return displayDirs
}

// openChmod sets the mode of the directory at p through a descriptor
// opened without following a link: in the shared /tmp a tool could swap
// the directory just made for a link to one of the user's own (~/.ssh),
// which a chmod by path would make writable by every user.
func openChmod(p string, mode uint32) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	_ = unix.Fchmod(fd, mode)
}

// devPTS is where the user's pseudo-terminals are, and devPTMX what
// opens a new one.
const (
	devPTS  = devices.PTS
	devPTMX = devices.PTMX
)

// privatePTYs mounts a devpts instance of the engine's own on p, and
// links /dev/ptmx to its ptmx: a pty a tool opens (script, ssh -t,
// expect) is one of its own, and the user's pseudo-terminals (every
// terminal window, ssh session and tmux pane, each owned by the user),
// which a tool would paint over (a forged approval on the operator's
// `mosaicctl attach`) or read a password from, are in no instance here.
func privatePTYs(p string) error {
	if err := unix.Mount("devpts", p, "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620,max=256"); err != nil {
		return err
	}
	return os.Symlink("pts/ptmx", devPTMX)
}

// The shared-memory and message-queue file systems: their files are the
// user's processes' POSIX shared memory and queues.
const (
	devShm    = devices.Shm
	devMqueue = devices.Mqueue
)

// privateShm puts a fresh tmpfs of the engine's own on /dev/shm (1777, as
// the system's; its pages are charged to the engine's memory): the user's
// processes' POSIX shared memory there (an editor's, a sound server's, a
// Python multiprocessing pool's) is no longer the tools' to read or
// write, and what a tool's own processes share still works. The IPC
// namespace the held child was cloned in does the same for System V
// shared memory, semaphores and message queues.
func privateShm(p string) error {
	return unix.Mount("mosaic-shm", p, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777")
}

// privateMqueue mounts the engine's own IPC namespace's message queues on
// /dev/mqueue, where the user's were.
func privateMqueue(p string) error {
	return unix.Mount("mqueue", p, "mqueue", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
}

// dirMode is a directory's permission bits with its sticky bit: a
// private copy keeps the mode its servers check (tmux and screen want
// their own directory 0700, screen a root of 0777, which only the user's
// uid can use inside the engine's user namespace).
func dirMode(fi os.FileInfo) uint32 {
	m := uint32(fi.Mode().Perm())
	if fi.Mode()&os.ModeSticky != 0 {
		m |= unix.S_ISVTX
	}
	return m
}

// mask makes p unreachable: an empty, read-only tmpfs over a directory,
// /dev/null bound over anything else (a socket there answers ECONNREFUSED).
func mask(p string) error {
	st, err := os.Lstat(p)
	if err != nil {
		return err
	}
	if st.IsDir() {
		return unix.Mount("mosaic-mask", p, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC,
			"size=4k,nr_inodes=1,mode=0555")
	}
	return unix.Mount("/dev/null", p, "", unix.MS_BIND, "")
}

// dropPrivileges runs on the held child's main thread right before the
// engine is forked from it: no ambient capability reaches the engine's
// exec, and no_new_privs keeps a setuid or file-capability binary from
// handing one back.
func dropPrivileges() error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_CAP_AMBIENT_CLEAR_ALL): %w", err)
	}
	return nil
}

// namespaces reads pid's namespaces of each confined type with this
// process's own, and checks that each differs.
func namespaces(pid int) ([]proofs.Namespace, error) {
	var out []proofs.Namespace
	for _, typ := range proofs.ConfinedNamespaces {
		en, err := procfs.Namespace(pid, typ)
		if err != nil {
			return out, err
		}
		cn, err := procfs.Namespace(procfs.Self, typ)
		if err != nil {
			return out, err
		}
		e, c := en.Ino, cn.Ino
		out = append(out, proofs.Namespace{Type: typ, Engine: e, Controller: c})
		if e == c {
			return out, fmt.Errorf("held child %d shares this process's %s namespace %d", pid, typ, e)
		}
	}
	return out, nil
}

// evidence turns a held child's report into the cohort's confinement
// evidence, read from the kernel: its namespaces as /proc/<pid>/ns shows
// them to the launcher.
func evidence(pid int, rep confineReport, cgroup string) (proofs.Confinement, error) {
	if !rep.Confined {
		return proofs.Confinement{}, fmt.Errorf("%w: %s", ErrConfinement, rep.Error)
	}
	ns, err := namespaces(pid)
	if err != nil {
		return proofs.Confinement{}, fmt.Errorf("%w: %w", ErrConfinement, err)
	}
	if len(rep.Masked) == 0 {
		return proofs.Confinement{}, fmt.Errorf("%w: nothing could be masked (absent: %v)", ErrConfinement, rep.Absent)
	}
	return proofs.Confinement{Confined: true, Namespaces: ns, Masked: rep.Masked, ReadOnly: rep.ReadOnly, Devices: rep.Devices, CgroupRoot: cgroup,
		Scoped: rep.Scoped, Unscoped: rep.Unscoped, ToolShell: rep.ToolShell, Unnested: rep.Unnested}, nil
}

// confinementAvailable probes whether engines can be confined on this
// machine, and says why not. A success is kept for the Manager's life, and
// for the boot in the runtime directory (probemark.go); a failure is not,
// so a passing hiccup (a probe timing out on a loaded machine) does not
// leave every later engine unconfined.
func (m *Manager) confinementAvailable(ctx context.Context) (bool, string) {
	if m.cfg.NoConfinement {
		return false, "confinement turned off in the configuration"
	}
	m.probeMu.Lock()
	defer m.probeMu.Unlock()
	if m.probed {
		return true, ""
	}
	if probeMarked() {
		m.probed, m.probedByMark = true, true
		return true, ""
	}
	if err := m.faults.heldStart(true); err != nil {
		return false, err.Error()
	}
	if _, err := ProbeConfinement(ctx); err != nil {
		if errors.Is(err, ErrCoverPath) || errors.Is(err, ErrNamespacesUsedUp) {
			// The kernel confines; a path does not cover, or the user's
			// processes hold every namespace the limit allows (an
			// engine's tool can). Neither kept nor marked: the launch
			// fails closed on it, never unconfined.
			return true, ""
		}
		return false, err.Error()
	}
	m.probed = true
	markProbed()
	return true, ""
}

// ProbeConfinement sets up an engine's confinement in a throwaway held
// child that runs nothing, exactly as a launch would (namespaces, masks,
// /proc, cgroup namespace and view), and returns the evidence it would
// record. The program must call MaybeRunHeld first thing in main. An error
// says why confinement is unavailable (for `mosaicctl doctor`).
func ProbeConfinement(ctx context.Context) (proofs.Confinement, error) {
	if os.Geteuid() == 0 {
		return proofs.Confinement{}, fmt.Errorf("%w: running as root, the engine would be root in its user namespace: run mosaic as an ordinary user", ErrConfinement)
	}
	plan, err := planConfinement()
	if err != nil {
		return proofs.Confinement{}, err
	}
	plan.Probe = true
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return proofs.Confinement{}, err
	}
	defer null.Close()
	held, err := startHeld("/", null, null, os.Stderr, true)
	if err != nil {
		return proofs.Confinement{}, heldStartError(err)
	}
	defer held.abort()
	by := time.Now().Add(10 * time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(by) {
		by = d
	}
	if err := awaitReady(held.ready, roleHeld, by); err != nil {
		return proofs.Confinement{}, fmt.Errorf("probe: %w", err)
	}
	rep, err := held.handshake(release{Confine: &plan}, by)
	if err != nil {
		return proofs.Confinement{}, fmt.Errorf("%w: probe: %w", ErrConfinement, err)
	}
	cg, _ := procfs.Cgroup2(held.cmd.Process.Pid)
	return evidence(held.cmd.Process.Pid, rep, cg)
}

// readLine reads one newline-terminated line from f before the deadline.
func readLine(f *os.File, deadline time.Time) ([]byte, error) {
	f.SetReadDeadline(deadline)
	b, err := bufio.NewReaderSize(f, 64<<10).ReadBytes('\n')
	if err != nil {
		return nil, err
	}
	return b, nil
}
