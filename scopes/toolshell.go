package scopes

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"runtime"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ToolShell is where a confined engine finds the tool shell: this
// program, bound read-only onto a file of the engine's own /dev (itself
// read-only, so no tool can put anything else there), run by its name.
// An engine that runs its tools' commands with it (Pi's shellPath) has
// each tool in a Landlock domain of its own, nested in the engine's: a
// domain may ptrace, pidfd_getfd or open /proc/<pid>/mem of its own
// processes and those of domains nested in it, never of a process
// outside, so a tool cannot attach to its engine and write on the
// engine's stdout, with Yama or without (docs/security.md "Without
// Yama"). "bash" is in the name because Claude Code takes an override
// only where it is (CLAUDE_CODE_SHELL).
const ToolShell = devDir + "/" + toolShellName

// toolShellName is the name that makes this program the tool shell
// (MaybeRunHeld): the engine runs it with the arguments of a shell, and
// no variable of ours reaches the tool's environment.
const toolShellName = "mosaic-bash"

// referABI is the first Landlock ABI that lets a rule grant
// LANDLOCK_ACCESS_FS_REFER (Linux 5.19). A domain that handles any file
// access denies every link or rename into another directory unless a
// rule grants it, so on ABI 1 a tool's domain would break mv and git.
const referABI = 2

// toolsNestable says whether this kernel can nest a tool's domain
// (nestTool), or why not. The held child asks before it binds the tool
// shell: where it cannot, the engine runs its default shell, as before,
// and the report says why.
func toolsNestable() string {
	abi, why := landlockABI()
	if why == "" && abi < referABI {
		why = fmt.Sprintf("Landlock ABI %d cannot grant renames across directories (ABI %d, Linux 5.19, can)", abi, referABI)
	}
	return why
}

// openSelf opens this program (O_PATH) by its path in the held child's
// mount namespace, before any mask covers it (mosaic's own bin
// directory is masked), checked to be the very file it runs from: a
// bind's source must be a mount of the caller's namespace, and
// /proc/self/exe leads to the launcher's.
func openSelf() (int, error) {
	p, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return -1, err
	}
	fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", p, err)
	}
	var at, self unix.Stat_t
	if err := unix.Fstat(fd, &at); err != nil || unix.Stat("/proc/self/exe", &self) != nil || at.Dev != self.Dev || at.Ino != self.Ino {
		unix.Close(fd)
		return -1, fmt.Errorf("%s is no longer the program that runs (replaced since it started?)", p)
	}
	return fd, nil
}

// bindToolShell binds this program (self, from openSelf) read-only at
// ToolShell, in the held child's mount namespace, on the engine's /dev
// before sealDev makes it read-only. The bind is a mount of its own:
// the engine's /dev is noexec, the binary's own mount is not.
func bindToolShell(self int) error {
	f, err := os.OpenFile(ToolShell, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o555)
	if err != nil {
		return fmt.Errorf("make %s: %w", ToolShell, err)
	}
	f.Close()
	if err := unix.Mount(fmt.Sprintf("/proc/self/fd/%d", self), ToolShell, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind this program at %s: %w", ToolShell, err)
	}
	if err := unix.Mount("", ToolShell, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("make %s read-only: %w", ToolShell, err)
	}
	return nil
}

// runToolShell is this program run as the tool shell: it puts itself in
// a domain nested in the engine's and becomes the shell the engine would
// have run, with the same arguments (-c COMMAND). A tool whose domain
// cannot be made is not run: the held child bound the tool shell only on
// a kernel that can nest (toolsNestable), so a failure here is a
// refusal the kernel did not announce (a seccomp filter, the 16 nested
// domains Landlock allows used up), and running the command anyway would
// hand it its engine. The tool's output says why, where the model and
// the user read it.
func runToolShell() {
	// The domain is the thread's, and exec keeps the calling thread's.
	runtime.LockOSThread()
	if err := nestTool(); err != nil {
		fmt.Fprintf(os.Stderr, "mosaic: this command was not run: its own Landlock domain, which keeps it from attaching to the engine, could not be made: %v\n", err)
		os.Exit(126)
	}
	dropHanded()
	sh := realShell()
	arg0 := sh
	if strings.HasPrefix(os.Args[0], "-") {
		arg0 = "-" + path.Base(sh) // a login shell, as it was asked to be
	}
	err := syscall.Exec(sh, append([]string{arg0}, os.Args[1:]...), os.Environ())
	fmt.Fprintf(os.Stderr, "mosaic: exec %s: %v\n", sh, err)
	os.Exit(127)
}

// isToolShellName says whether arg0 (argv[0]) runs this program as the
// tool shell: by its path, or as a login shell, "-mosaic-bash", the way
// tmux, screen and login(1) run $SHELL (Claude Code gives its Bash
// commands SHELL=/dev/mosaic-bash). Else a tool's `tmux` ran mosaicctl's
// command line in its pane instead of a shell.
func isToolShellName(arg0 string) bool {
	return strings.TrimPrefix(path.Base(arg0), "-") == toolShellName
}

// realShell is the shell Pi runs when no shellPath is set
// (getShellConfig, dist/utils/shell.js of 0.85.1): /bin/bash, else bash
// on PATH, else sh.
func realShell() string {
	if _, err := os.Stat("/bin/bash"); err == nil {
		return "/bin/bash"
	}
	for _, name := range []string{"bash", "sh"} {
		if p, err := exec.LookPath(name); err == nil && path.IsAbs(p) {
			return p
		}
	}
	return "/bin/sh"
}

// nestTool puts the calling thread in a new Landlock domain nested in
// its present one. Any domain restricts ptrace to itself and what is
// nested in it; what the domain handles is only what it must to exist
// (a ruleset handles something), and the least a tool loses by it:
//   - with scopes (ABI 6), the abstract Unix socket scope alone: a tool
//     cannot connect to an abstract socket an earlier tool call bound
//     (each call's domain is its own). A domain that handles any file
//     access is denied every mount, umount and pivot_root, which would
//     end `unshare -Urm`, bwrap and rootless podman in a tool's own user
//     namespace (TestToolCanStillMountInItsUserNamespace).
//   - before them (ABI 2 to 5), LANDLOCK_ACCESS_FS_REFER, granted
//     beneath /: it denies no file access, but the mounts above.
//
// No signal scope: a later tool call's `kill` of the server an earlier
// one left running must work, so a tool can still signal its engine.
// no_new_privs, which an unprivileged process needs for a domain, is the
// engine's already (dropPrivileges); it is set again in case.
func nestTool() error {
	if reason := toolsNestable(); reason != "" {
		return errors.New(reason)
	}
	fd, err := toolRuleset()
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(fd), 0, 0); errno != 0 {
		return fmt.Errorf("landlock_restrict_self: %w", errno)
	}
	return nil
}

// toolRuleset is the ruleset of a tool's domain (nestTool).
func toolRuleset() (int, error) {
	if abi, _ := landlockABI(); abi >= scopeABI {
		attr := scopeAttr{scoped: unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET}
		fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
		if errno != 0 {
			return -1, fmt.Errorf("landlock_create_ruleset(scoped): %w", errno)
		}
		return int(fd), nil
	}
	attr := struct{ handledFS uint64 }{unix.LANDLOCK_ACCESS_FS_REFER}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if errno != 0 {
		return -1, fmt.Errorf("landlock_create_ruleset: %w", errno)
	}
	root, err := unix.Open("/", unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Close(int(fd))
		return -1, fmt.Errorf("open /: %w", err)
	}
	defer unix.Close(root)
	rule := unix.LandlockPathBeneathAttr{Allowed_access: unix.LANDLOCK_ACCESS_FS_REFER, Parent_fd: int32(root)}
	if _, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, fd, unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&rule)), 0, 0, 0); errno != 0 {
		unix.Close(int(fd))
		return -1, fmt.Errorf("landlock_add_rule(/): %w", errno)
	}
	return int(fd), nil
}
