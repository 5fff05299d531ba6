package controller

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/engine/pi"
	"github.com/mosaic-agents/mosaic/internal/atomicfile"
	"github.com/mosaic-agents/mosaic/protocol"
)

// agentFiles are what the engine takes from the user's agent directory
// by a link: the providers and models (read-only in every engine:
// inputs). Its credentials are copied (auth.json, authrelay.go).
// Everything else an agent directory may hold (settings.json with its
// extensions and packages, extensions/, prompts, themes, skills) stays
// out.
var agentFiles = []string{"models.json"}

// agentDirOf is the engine's agent directory of cv, beside the claim
// root; ownAgentDir prepares it at each spawn.
func (c *Controller) agentDirOf(cv *conversations.Conversation) string {
	return filepath.Join(filepath.Dir(c.cfg.Claims.Root()), "agent", cv.ID)
}

// ownAgentDir prepares the engine's agent directory (PI_CODING_AGENT_DIR),
// which the controller owns: a fresh settings.json of {} at every spawn
// (so nothing the user's settings or a previous engine persisted there,
// such as queue modes, widens or changes the seal), a link to the user's
// models.json, and a copy of the user's auth.json ({} when the user has
// none), nothing else. A refresh the last engine left in its copy goes
// back to the user's file first. The user's agent directory is the
// conversation's agent_dir, else ~/.pi/agent.
//
// It returns the directory and the files to seal (engine.Spec.Sealed): the copy, unless it
// holds an OAuth login. Pi runs an api_key "!command" of its auth.json
// itself, in the engine's own domain, and Pi's own write and edit tools
// run in Pi's process, which reaches the directory through its
// descriptor: only a file Pi cannot write keeps a model from planting
// one. A login's refresh is the one write Pi makes there, so a copy with
// one stays writable (docs/security.md "Pi's command credentials").
func (c *Controller) ownAgentDir(cv *conversations.Conversation) (dir string, sealed []string, err error) {
	src, err := userAgentDir(cv.Engine.AgentDir)
	if err != nil {
		return "", nil, err
	}
	dir = c.agentDirOf(cv)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", nil, fmt.Errorf("engine agent directory %s: %w", dir, err)
	}
	c.authMu.Lock()
	defer c.authMu.Unlock()
	// Opened, its owner access given back, before the relay reads the
	// last engine's auth.json in it: a tool may have chmod-ed it to 000.
	top, err := openOwnDir(unix.AT_FDCWD, dir, dir)
	if err != nil {
		return "", nil, agentDirRefusal(dir, err)
	}
	defer top.Close()
	c.authMasksNow(cv, true)
	creds, err := c.nextCopy(filepath.Join(src, "auth.json"), dir)
	if err != nil {
		return "", nil, fmt.Errorf("engine agent directory %s: its credentials: %w", dir, err)
	}
	// What an engine left (a settings.json it wrote, a lock, a planted
	// extensions/, a tree a tool made unreadable) goes; the links are
	// made again.
	if err := emptyDir(top, dir, 0); err != nil {
		return "", nil, agentDirRefusal(dir, err)
	}
	if err := atomicfile.Write(filepath.Join(dir, "settings.json"), []byte("{}\n"), 0o600); err != nil {
		return "", nil, fmt.Errorf("engine agent directory %s: %w", dir, err)
	}
	for _, name := range agentFiles {
		target := filepath.Join(src, name)
		if _, err := os.Stat(target); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			return "", nil, fmt.Errorf("engine agent directory %s: %w", dir, err)
		}
	}
	if creds == nil {
		creds = []byte("{}\n")
	}
	auth := filepath.Join(dir, "auth.json")
	if err := atomicfile.Write(auth, creds, 0o600); err != nil {
		return "", nil, fmt.Errorf("engine agent directory %s: %w", dir, err)
	}
	if pi.HoldsLogin(creds) {
		return dir, nil, nil
	}
	return dir, []string{auth}, nil
}

// nextCopy is what the next engine's copy of the user's auth.json holds:
// the user's file, after a refresh the last engine left in its copy went
// back to it. When it cannot go back now (Pi holds the user's lock), the
// copy carries it (by the relay's own rules) and the relay takes it back
// later: the refresh token in it may be the only good one.
func (c *Controller) nextCopy(user, dir string) ([]byte, error) {
	err := c.relayAuthLocked(user, dir)
	if err != nil && !errors.Is(err, errAuthLocked) {
		c.auditEngine("auth-relay-failed", "the OAuth relay of the last engine's auth.json failed before the launch: "+err.Error(), nil)
	}
	theirs, rerr := readUserAuth(user, c.authMasks)
	if rerr != nil {
		return nil, rerr
	}
	if err == nil {
		return theirs, nil
	}
	var leftover []byte
	if fd, derr := openDir(dir, false); derr == nil {
		leftover, _ = readOwnAuth(fd, filepath.Join(dir, "auth.json"))
		unix.Close(fd)
	}
	if merged, _, _, _ := pi.RelayAuth(theirs, leftover, time.Now()); merged != nil {
		return merged, nil
	}
	return theirs, nil
}

// The engine's agent directory is the engine's to write, so its tools'
// too: a tool can leave a tree there that os.RemoveAll cannot remove, a
// directory of mode 000 with an entry (`mkdir -p trap/x && chmod 000
// trap`), and every later launch and recover failed on it. The
// controller runs as the same uid and owns everything in it, so the
// removal gives the owner back what it needs on each directory it
// descends (read, write, search), as scopes/grant.go does for cgroup
// files, then removes.
//
// Whether a tool still runs: a launch, a wake and a recover prepare the
// directory only after a proven stop of the last execution's cohort,
// tools included (recover asks first: recoverableLocked). Nothing here
// relies on them being gone, though: every step is relative to a directory descriptor already opened,
// never through a symlink, and a chmod acts on the inode a descriptor
// pins, not on a name a tool could swap for a symlink between a check and
// the chmod; so the walk never leaves the agent directory, and a tool
// racing it can at most make it fail (a refusal) or find its own files
// gone.

// openOwnDir opens the directory name (relative to dirfd; path names it
// in errors) to read and change its entries, first giving its owner
// read, write and search where a tool took them away. A symlink there is
// refused (ELOOP, or ENOTDIR), never followed.
func openOwnDir(dirfd int, name, path string) (*os.File, error) {
	// O_PATH needs no permission on the directory itself, only search on
	// its parent: it pins the inode a mode-000 directory is, which no
	// later rename or symlink swapped in at name can change.
	pfd, err := unix.Openat(dirfd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return nil, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	// The pinned inode by its /proc/self/fd link: fchmod refuses an O_PATH
	// descriptor (EBADF), fchmodat follows a symlink at name (it has no
	// AT_SYMLINK_NOFOLLOW on Linux), and fchmodat2 with AT_EMPTY_PATH is
	// Linux 6.6 and later. The link resolves to the inode, not by name.
	pinned := fmt.Sprintf("/proc/self/fd/%d", pfd)
	if st.Mode&unix.S_IRWXU != unix.S_IRWXU {
		if err := unix.Chmod(pinned, st.Mode&0o7777|unix.S_IRWXU); err != nil {
			return nil, &fs.PathError{Op: "chmod", Path: path, Err: err}
		}
	}
	fd, err := unix.Open(pinned, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// emptyBatch is how many entries emptyDir reads at once, and
// maxEmptyReads how many reads of one directory it makes: a static
// directory of up to 16M entries is emptied, and a process still writing
// one cannot hold the launch, and the auth relay's lock, for ever.
const (
	emptyBatch    = 1024
	maxEmptyReads = 1 << 14
)

// maxAgentDepth is how deep below the agent directory emptyDir descends.
// Each level it is in holds an open directory, its read buffer and its
// path: a tool's `mkdir a; cd a` loop 100,000 deep would have made the
// walk hold gigabytes (the paths alone grow with the square of the
// depth) and a descriptor a level. Pi and its settings nest a few levels.
const maxAgentDepth = 256

// errTooDeep is a tree below the agent directory deeper than maxAgentDepth.
var errTooDeep = fmt.Errorf("directories nested more than %d deep", maxAgentDepth)

// emptyDir removes every entry of d (path names it in errors), each
// directory below after openOwnDir gave its owner access back; nothing
// is followed through a symlink, a symlink is removed as itself. depth is
// d's below the agent directory.
func emptyDir(d *os.File, path string, depth int) error {
	if depth > maxAgentDepth {
		return &fs.PathError{Op: "empty", Path: path, Err: errTooDeep}
	}
	for range maxEmptyReads {
		names, err := d.Readdirnames(emptyBatch)
		if len(names) == 0 {
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return &fs.PathError{Op: "read", Path: path, Err: err}
			}
		}
		for _, name := range names {
			if err := removeAt(d, name, filepath.Join(path, name), depth); err != nil {
				return err
			}
		}
		// Removing entries while reading on may skip some (getdents gives
		// no order under change): read again from the start, which holds
		// only what is left.
		if _, err := d.Seek(0, io.SeekStart); err != nil {
			return &fs.PathError{Op: "seek", Path: path, Err: err}
		}
	}
	return &fs.PathError{Op: "empty", Path: path, Err: fmt.Errorf("entries still appear after %d reads of %d", maxEmptyReads, emptyBatch)}
}

// removeAt removes the entry name of d (at depth), a directory with all it
// holds.
func removeAt(d *os.File, name, path string, depth int) error {
	dirfd := int(d.Fd())
	// unlinkat without AT_REMOVEDIR removes anything but a directory
	// (a symlink as itself) and says EISDIR for one.
	err := unix.Unlinkat(dirfd, name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if !errors.Is(err, unix.EISDIR) {
		return &fs.PathError{Op: "remove", Path: path, Err: err}
	}
	sub, err := openOwnDir(dirfd, name, path)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	err = emptyDir(sub, path, depth+1)
	sub.Close()
	if err != nil {
		return err
	}
	if err := unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		return &fs.PathError{Op: "remove", Path: path, Err: err}
	}
	return nil
}

// agentDirRefusal is the refusal of a launch whose agent directory could
// not be made the controller's. The fix names the whole directory: what
// blocks a removal may be the entry's parent (a directory that may not be
// written), and the cause names the entry.
func agentDirRefusal(dir string, err error) error {
	return protocol.Wrap(protocol.CodeConfiguration, err,
		"engine agent directory %s cannot be emptied for the launch; give its owner access back (`chmod -R u+rwX %s`) or remove it (`rm -rf %s`; mosaic makes it again), then recover again",
		dir, dir, dir)
}
