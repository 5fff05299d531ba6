package scopes

import (
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/mosaic-agents/mosaic/internal/xdg"
)

// runtimeDirs are the user's runtime directories that exist
// ($XDG_RUNTIME_DIR and /run/user/<uid>), by their resolved paths, each
// once.
func runtimeDirs() []string {
	var out []string
	cands := []string{"/run/user/" + strconv.Itoa(os.Getuid())}
	if d, err := xdg.RuntimeDir(); err == nil {
		cands = append([]string{d}, cands...)
	}
	for _, d := range cands {
		real, err := filepath.EvalSymlinks(d)
		if err != nil || !path.IsAbs(real) || slices.Contains(out, real) {
			continue
		}
		if fi, err := os.Stat(real); err == nil && fi.IsDir() {
			out = append(out, real)
		}
	}
	return out
}

// privateRuntime puts a fresh, writable tmpfs of the engine's own over a
// runtime directory. What the user's sessions keep there is out of reach:
// editor servers (Neovim's and Emacs's sockets, VS Code's IPC), a
// terminal's remote control (WezTerm, kitty), rootless container
// daemons, the sound server, the document portal; a server started
// after the launch too. The key agents as well: gpg-agent asks the user
// for a passphrase in a pinentry of the tool's wording and hands back
// what was typed, and its socket directory, bound back, would let a tool
// replace the sockets the user's own gpg and ssh then talk to; ssh-agent
// signs as the user (and no engine is given SSH_AUTH_SOCK). Its pages
// are charged to the engine's memory like any file it writes; the size
// and inode limits are those of a generous runtime directory.
func privateRuntime(p string) error {
	return unix.Mount("mosaic-runtime", p, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=64m,nr_inodes=16384,mode=0700")
}
