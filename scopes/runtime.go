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

// keyAgents are the user's key agents under the runtime directories rts,
// bound back into the engine's private copies: gpg-agent's socket
// directory (rt/gnupg, where gpg looks without being told) and the
// ssh-agent socket $SSH_AUTH_SOCK names. They act with the user's keys
// (a tool can sign a commit or push over ssh, as the user would) but
// start no process on request, so the cohort's promise holds with them;
// everything else in the runtime directory stays behind the tmpfs.
func keyAgents(rts []string) []string {
	var out []string
	for _, rt := range rts {
		if p := path.Join(rt, "gnupg"); ownDir(p) {
			out = append(out, p)
		}
	}
	if s := os.Getenv("SSH_AUTH_SOCK"); path.IsAbs(s) {
		real, err := filepath.EvalSymlinks(s)
		if err == nil && slices.ContainsFunc(rts, func(rt string) bool { return below(rt, real) }) && ownSocket(real) && !slices.Contains(out, real) {
			out = append(out, real)
		}
	}
	return out
}

// ownSocket says whether p is a socket (not a link to one) of this user.
func ownSocket(p string) bool {
	var st unix.Stat_t
	return unix.Lstat(p, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFSOCK && int(st.Uid) == os.Getuid()
}

// privateRuntime puts a fresh, writable tmpfs of the engine's own over a
// runtime directory. What the user's sessions keep there is out of reach:
// editor servers (Neovim's and Emacs's sockets, VS Code's IPC), a
// terminal's remote control (WezTerm, kitty), rootless container
// daemons, the sound server, the document portal; a server started
// after the launch too. Its pages are charged to the engine's memory
// like any file it writes; the size and inode limits are those of a
// generous runtime directory.
func privateRuntime(p string) error {
	return unix.Mount("mosaic-runtime", p, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=64m,nr_inodes=16384,mode=0700")
}
