package controller

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/internal/detour"
	"github.com/mosaic-agents/mosaic/internal/ids"
	"github.com/mosaic-agents/mosaic/scopes"
	"golang.org/x/sys/unix"
)

// The files of the auth relay (authrelay.go): the user's auth.json, read
// and written in place where it is (through a link the user made), and
// the engine's copy in its agent directory, which the engine may have
// replaced with anything: a link, a fifo, a directory, a huge file. The
// copy is only ever opened relative to the agent directory, without
// following a link, and never waited on.

// maxAuth bounds what is read of an auth.json: logins and keys are a few
// KiB.
const maxAuth = 1 << 20

// errAuthLocked is a lock Pi (or another controller) holds: the relay
// tries again at its next tick.
var errAuthLocked = errors.New("auth.json is locked")

// staleLock is when a lock is left by a process that died holding it:
// Pi's async lock counts one stale after 30 s, and renews its own more
// often.
const staleLock = 30 * time.Second

// readUserAuth reads the user's auth.json; a missing one is empty. A
// read that is not JSON is tried again a few times: a writer that does
// not take the lock as this reader does not (Pi's own, the relay of
// another conversation) may be between its write and its truncate. One
// that stays no JSON is refused: Pi could not read it either, and what it
// holds (a link a tool made to an env file) is no login to copy.
func readUserAuth(path string, masks []string) ([]byte, error) {
	for try := 0; try < 5; try++ {
		f, err := openUserAuth(path, unix.O_RDONLY, masks)
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		b, err := readBounded(f, path)
		f.Close()
		if err != nil || len(bytes.TrimSpace(b)) == 0 || json.Valid(b) {
			return b, err
		}
		tornWait()
	}
	return nil, fmt.Errorf("%s: %w: mend it (Pi cannot read it either) or remove it", path, errAuthNotJSON)
}

// errAuthNotJSON is an auth.json that stays no JSON over several reads.
var errAuthNotJSON = errors.New("auth.json is not JSON")

// tornWait is the pause before an auth.json that did not parse is read
// again; a test makes the writer finish there.
var tornWait = func() { time.Sleep(10 * time.Millisecond) }

// openUserAuth opens the user's auth.json where it is (through a link the
// user made, as Pi does), never waiting on what is not a regular file: a
// fifo there would hang every launch. Nor where it leads into what the
// engines have masked (masks): the controller reads and writes it
// outside any engine, so a link a tool planted in an agent directory no
// engine covered yet (one added after that engine's launch) would have
// another conversation's key copied into an engine, or a refresh written
// over it. Where the opened file is, is read from the descriptor, not the
// path, so a link changed after the open does not count.
func openUserAuth(path string, mode int, masks []string) (*os.File, error) {
	return openUserAuthAt(unix.AT_FDCWD, path, path, mode, masks)
}

// openUserAuthAt is openUserAuth of name relative to the directory dir
// (the one the relay holds the lock in, so the file written is the one
// in the locked directory); path names it in errors.
func openUserAuthAt(dir int, name, path string, mode int, masks []string) (*os.File, error) {
	fd, err := unix.Openat(dir, name, mode|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("open %s: not a regular file: %w", path, errAuthNotFile)
	}
	if err := notMasked(fd, path, masks); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// notMasked refuses the open file fd (path) where it lies in masks.
func notMasked(fd int, path string, masks []string) error {
	m, err := maskedAt(fd, masks)
	switch {
	case err != nil:
		return fmt.Errorf("open %s: %w", path, err)
	case m != "":
		return fmt.Errorf("open %s: %w: it lies in %s, which no engine can read; keep the agent directory and its auth.json outside it (a link there may be a tool's)", path, errAuthMasked, m)
	}
	return nil
}

// authMasksFor is how long the relay keeps the masks it computed: a
// conversation added since has its env file masked in the engines
// launched after it, and such a file is no JSON, which is refused anyway.
const authMasksFor = 30 * time.Second

// authMasksNow computes c.authMasks for an engine of cv (the controller's
// own conversation where nil) when they are older than authMasksFor, or
// always. Caller holds c.authMu.
func (c *Controller) authMasksNow(cv *conversations.Conversation, always bool) {
	if !always && c.authMasks != nil && time.Since(c.authMasksAt) < authMasksFor {
		return
	}
	if cv == nil {
		cv = c.cfg.Conversation
	}
	masks := scopes.Unseen(c.engineMasks(cv)...)
	c.authMasks, c.authMasksAt = append(masks, resolved(masks)...), time.Now()
}

// whereOpen is the path of the open file fd in this mount namespace. The
// path /proc/self/fd reads back is the one in the namespace the file was
// reached in: a link through /proc/<pid>/root (a toolbox container, whose
// /run/host shows the host's root) reads back as a path of that
// namespace, which here names another file or none, so it is taken only
// where it names this very file. It is opened here through no link
// (detour.Open): a directory on it swapped for a link as it is looked up
// (a tool's rename) cannot carry the lookup to the file elsewhere.
func whereOpen(fd int) (string, error) {
	p, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
	if err != nil {
		return "", fmt.Errorf("where it leads: %w", err)
	}
	var open, here unix.Stat_t
	at, err := detour.Open(p, unix.O_PATH|unix.O_CLOEXEC)
	if err == nil {
		err = unix.Fstat(at, &here)
		unix.Close(at)
	}
	if err == nil {
		err = unix.Fstat(fd, &open)
	}
	if err != nil || open.Dev != here.Dev || open.Ino != here.Ino {
		return "", fmt.Errorf("%w: it lies in another mount namespace (reached through /proc), or moved as it was opened", errAuthMasked)
	}
	return p, nil
}

// errAuthMasked is a user's auth.json that leads into a masked path.
var errAuthMasked = errors.New("a link to what the engines mask")

// maskedAt is the one of masks (authMasksNow adds each as its links
// resolve) that the open file fd lies in, "" for none.
func maskedAt(fd int, masks []string) (string, error) {
	if len(masks) == 0 {
		return "", nil
	}
	real, err := whereOpen(fd)
	if err != nil {
		return "", err
	}
	for _, m := range masks {
		if under(real, []string{m}) {
			return m, nil
		}
	}
	return "", nil
}

// errAuthNotFile is an auth.json that is a fifo, a device, a directory.
var errAuthNotFile = errors.New("auth.json is not a regular file")

// readOwnAuth reads the engine's copy in dir (an O_PATH or directory fd);
// one that is missing or no regular file is empty.
func readOwnAuth(dir int, name string) ([]byte, error) {
	fd, err := unix.Openat(dir, "auth.json", unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ELOOP) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, nil
	}
	return readBounded(f, name)
}

func readBounded(f *os.File, name string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(f, maxAuth+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if len(b) > maxAuth {
		return nil, fmt.Errorf("read %s: larger than %d bytes: %w", name, maxAuth, errAuthTooLarge)
	}
	return b, nil
}

// errAuthTooLarge is an auth.json past maxAuth.
var errAuthTooLarge = errors.New("auth.json too large")

// writeUserAuth writes b over the user's auth.json f (open for reading
// and writing, holding old) in place, as Pi writes it, under the lock:
// never a new file renamed in by name, since the directory the file lies
// in may be one an engine can write (a dotfiles tree a link leads into,
// an agent directory left writable) and the engine would rename its own
// file over the new one. The blocks are taken first, so a full disk (a
// tool can fill it) fails the write before a byte changes; any later
// failure puts old back.
func writeUserAuth(f *os.File, old, b []byte) error {
	err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_KEEP_SIZE, 0, int64(len(b)))
	if err != nil && !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.ENOSYS) {
		return fmt.Errorf("write %s: %w", f.Name(), err)
	}
	if err := overwrite(f, b); err != nil {
		if rerr := overwrite(f, old); rerr != nil {
			return fmt.Errorf("write %s: %w (and putting back what it held: %v)", f.Name(), err, rerr)
		}
		return fmt.Errorf("write %s: %w", f.Name(), err)
	}
	return nil
}

// overwrite makes f hold b, durably.
func overwrite(f *os.File, b []byte) error {
	if _, err := f.WriteAt(b, 0); err != nil {
		return err
	}
	if err := f.Truncate(int64(len(b))); err != nil {
		return err
	}
	return f.Sync()
}

// writeOwnAuth replaces the engine's copy in dir through a new file
// renamed over it: Pi reads either the old copy or the new one.
func writeOwnAuth(dir int, name string, b []byte) error {
	tmp := ids.New(".auth.json.relay-", 8)
	fd, err := unix.Openat(dir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(dir, tmp, dir, "auth.json")
	}
	if err != nil {
		unix.Unlinkat(dir, tmp, 0)
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

// lockAuth takes the lock Pi takes on an auth.json (proper-lockfile: a
// directory named auth.json.lock beside it, made atomically), in dir.
// One older than staleLock was left by a process that died and is taken
// over, as Pi's own locking does; any other is errAuthLocked.
func lockAuth(dir int, name string) (unlock func(), err error) {
	const lock = "auth.json.lock"
	for try := 0; try < 2; try++ {
		err = unix.Mkdirat(dir, lock, 0o700)
		if err == nil {
			return func() { unix.Unlinkat(dir, lock, unix.AT_REMOVEDIR) }, nil
		}
		if !errors.Is(err, unix.EEXIST) {
			return nil, fmt.Errorf("lock %s: %w", name, err)
		}
		var st unix.Stat_t
		if unix.Fstatat(dir, lock, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR ||
			time.Since(time.Unix(st.Mtim.Unix())) < staleLock {
			break
		}
		unix.Unlinkat(dir, lock, unix.AT_REMOVEDIR)
	}
	return nil, fmt.Errorf("lock %s: %w", name, errAuthLocked)
}

// openDir opens dir for the *at calls; follow says whether a link at it
// is followed (the user's own agent directory may be one) or refused
// (the engine's, which the engine could have replaced).
func openDir(dir string, follow bool) (int, error) {
	flags := unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC
	if !follow {
		flags |= unix.O_NOFOLLOW
	}
	fd, err := unix.Open(dir, flags, 0)
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", dir, err)
	}
	return fd, nil
}
