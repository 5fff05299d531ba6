package engine

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Spec is everything needed to start a sealed engine. The controller
// starts it (inside its systemd scope) with stdin and stdout as pipes that
// it hands to Engine.Open, and keeps stdin open for the engine's whole
// life.
type Spec struct {
	// Path is the program: for Pi the pinned Node, with the pinned entry
	// file as its first argument, so the bytes that run are the bytes
	// pinned, not whatever a pi symlink, wrapper or PATH points to later.
	Path string
	// Args is argv including argv[0].
	Args []string
	Env  []string
	Dir  string
	// Dirs are directories the engine reaches only through descriptors
	// it inherits, the i-th at HandedDir(i), never by their paths: a
	// confined engine's view hides them, and the tool shell does not pass
	// the descriptors on, so the engine writes there and its tools do not
	// (Pi's own agent directory, whose auth.json Pi runs "!" values of).
	Dirs []string
	// Sealed are files in Dirs the engine may read and not change (a
	// confined engine's; scopes.Spec.Sealed): Pi's auth.json where it
	// holds no OAuth login, so no "!command" key can be put in it.
	Sealed []string
}

// FirstHandedFD is the descriptor the engine inherits Spec.Dirs[0] at;
// the rest follow it, as os/exec numbers Cmd.ExtraFiles.
const FirstHandedFD = 3

// HandedDir is the path by which the engine names Spec.Dirs[i]: its own
// descriptor's link, which leads to the directory whatever its view
// shows at the directory's path, and leads a process that does not hold
// the descriptor nowhere.
func HandedDir(i int) string {
	return fmt.Sprintf("/proc/self/fd/%d", FirstHandedFD+i)
}

// Handed opens s.Dirs for os/exec's Cmd.ExtraFiles, which hands the i-th
// at HandedDir(i): an engine run outside a scope (tests, a manual run).
// The caller closes them once the engine started.
func (s Spec) Handed() ([]*os.File, error) {
	var out []*os.File
	for _, d := range s.Dirs {
		fd, err := unix.Open(d, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			for _, f := range out {
				f.Close()
			}
			return nil, &os.PathError{Op: "open", Path: d, Err: err}
		}
		out = append(out, os.NewFile(uintptr(fd), d))
	}
	return out, nil
}
