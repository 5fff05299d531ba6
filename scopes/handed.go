package scopes

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// handedFD is the descriptor the engine inherits Spec.Dirs[0] at, the
// rest following it (engine.FirstHandedFD, which names them to the
// engine; TestHandedFDIsTheEngines holds the two equal).
const handedFD = 3

// openHanded opens each directory the release hands the engine, before
// the confinement masks its path: the descriptor keeps the directory on
// the mount it was opened on, under whatever mask later covers it. Each
// is opened O_PATH (a name to resolve below, no access to the directory
// itself) and numbered above every descriptor the engine inherits them
// at, so that handing one never closes another (handOn). A symlink at
// the path is refused, never followed.
func openHanded(dirs []string) ([]int, error) {
	var fds []int
	for _, d := range dirs {
		fd, err := unix.Open(d, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == nil {
			var high int
			high, err = unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, handedFD+len(dirs))
			unix.Close(fd)
			fd = high
		}
		if err != nil {
			closeAll(fds)
			return nil, fmt.Errorf("hand the engine the directory %s: %w", d, err)
		}
		fds = append(fds, fd)
	}
	return fds, nil
}

// handOn puts each handed directory at its own descriptor, without
// close-on-exec, just before the exec of an unconfined engine
// (closeInherited marked everything else above stderr).
func handOn(fds []int) error {
	for i, fd := range fds {
		if err := unix.Dup3(fd, handedFD+i, 0); err != nil {
			return fmt.Errorf("hand the engine descriptor %d: %w", handedFD+i, err)
		}
	}
	return nil
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// dropHanded marks close-on-exec every O_PATH descriptor the tool shell
// inherited: what an engine was handed (Spec.Dirs), should the engine
// pass it on to the shell it starts. Pi's Node does not (libuv's spawn
// closes what it was not told to pass), but an engine is not trusted to
// keep it: the tool the shell runs reaches such a directory only by its
// path, which a confined engine's view masks, or through its engine's
// descriptor table, which the tool's nested domain keeps it from. A
// descriptor a tool's caller meant it to have (a pipe, a lock, a
// jobserver's) is an open file, never O_PATH, and stays.
func dropHanded() {
	var fds []int
	if entries, err := os.ReadDir("/proc/self/fd"); err == nil {
		for _, e := range entries {
			if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
				fds = append(fds, fd)
			}
		}
	} else {
		// No /proc to list them: every number a table of fdSlots holds.
		for fd := 3; fd < fdSlots; fd++ {
			fds = append(fds, fd)
		}
	}
	for _, fd := range fds {
		if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err == nil && fl&unix.O_PATH != 0 {
			unix.CloseOnExec(fd)
		}
	}
}

// sealHanded binds each sealed file (Spec.Sealed) read-only onto itself
// in the engine's mount namespace, reached through the descriptor of the
// handed directory that holds it, so that the engine reads the file and
// can neither write, replace nor remove it (a mount point: EBUSY), while
// the rest of the directory stays its to write. Through the descriptor,
// because the directory's path shows the mask by now: the descriptor's
// link leads to the directory on the mount under the mask, and the bind
// is made there, where the engine's own lookups through the same
// descriptor meet it. A file that is missing, a link, or in no handed
// directory fails the launch: an engine must never run with a file
// unsealed that the controller meant sealed.
func sealHanded(dirs []string, fds []int, sealed []string) ([]string, error) {
	var done []string
	for _, f := range sealed {
		at := ""
		for i, d := range dirs {
			if rel, ok := strings.CutPrefix(f, d+"/"); ok && filepath.IsLocal(rel) {
				at = fmt.Sprintf("/proc/self/fd/%d/%s", fds[i], rel)
			}
		}
		if at == "" {
			return done, fmt.Errorf("seal %s: in no directory handed to the engine", f)
		}
		var st unix.Stat_t
		if err := unix.Lstat(at, &st); err != nil {
			return done, fmt.Errorf("seal %s: %w", f, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFREG {
			return done, fmt.Errorf("seal %s: not a regular file", f)
		}
		if err := readOnly(at); err != nil {
			return done, fmt.Errorf("seal %s read-only: %w", f, err)
		}
		done = append(done, f)
	}
	return done, nil
}

// detachHanded replaces each handed descriptor of a confined engine by
// one of a detached copy of the directory's mount tree (open_tree
// OPEN_TREE_CLONE, recursive, so a seal made below is in it): its root
// is the directory itself, and .. at a mount's root that is attached
// nowhere stays there. The descriptor opened first is on the mount under
// the masks, where .. leads to the directory's parent as it is on disk:
// every other conversation's agent directory beside it, writable, and
// mosaic's state above (helper 156's review; TestHandedDirIsTheEnginesAlone
// reads the sibling's file through it). Called once the seals are made,
// while the held child still has CAP_SYS_ADMIN in the engine's user
// namespace.
func detachHanded(fds []int) error {
	for i, fd := range fds {
		tree, err := unix.OpenTree(fd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE|unix.AT_EMPTY_PATH)
		if err != nil {
			return fmt.Errorf("detach the handed directory %d: open_tree: %w", i, err)
		}
		high, err := unix.FcntlInt(uintptr(tree), unix.F_DUPFD_CLOEXEC, handedFD+len(fds))
		unix.Close(tree)
		if err != nil {
			return fmt.Errorf("detach the handed directory %d: %w", i, err)
		}
		unix.Close(fd)
		fds[i] = high
	}
	return nil
}
