package scopes

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/mosaic-agents/mosaic/internal/procfs"
	"golang.org/x/sys/unix"
)

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{
		"/sys/fs/cgroup":         "/sys/fs/cgroup",
		`/mnt/with\040space`:     "/mnt/with space",
		`/a\134b`:                `/a\b`,
		`/trailing\04`:           `/trailing\04`,
		`/tab\011and\012newline`: "/tab\tand\nnewline",
	} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestCgroup2Mount: the cgroup2 mount is /sys/fs/cgroup where it is one,
// else the first cgroup2 mount, its path unescaped; a hierarchy of
// cgroup v1 is none.
func TestCgroup2Mount(t *testing.T) {
	const (
		v1      = "30 25 0:26 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,name=systemd\n"
		hybrid  = "31 25 0:27 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
		pure    = "25 1 0:28 / /sys/fs/cgroup rw shared:9 - cgroup2 cgroup2 rw\n"
		escaped = "40 1 0:29 / /run/my\\040cgroups rw - cgroup2 cgroup2 rw\n"
	)
	for _, tc := range []struct {
		name, mountinfo, want string
	}{
		{"pure", v1 + pure, "/sys/fs/cgroup"},
		{"pure after another", escaped + pure, "/sys/fs/cgroup"},
		{"hybrid", v1 + hybrid, "/sys/fs/cgroup/unified"},
		{"escaped", v1 + escaped + hybrid, "/run/my cgroups"},
		{"none", v1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := cgroup2Mount(tc.mountinfo)
			if got != tc.want || (err != nil) != (tc.want == "") {
				t.Fatalf("cgroup2Mount = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestDevMounts: every mount of the devtmpfs but the one at /dev is
// masked whole: its root mounted again (a chroot's /dev), a node or a
// directory of it bound alone (a container's /dev/fuse); a tmpfs or
// another filesystem is not.
func TestDevMounts(t *testing.T) {
	const mountinfo = `22 1 0:5 / /dev rw,nosuid shared:2 - devtmpfs udev rw,size=1k
23 22 0:21 / /dev/pts rw - devpts devpts rw
90 1 0:5 / /srv/chroot/sid\040x/dev rw - devtmpfs udev rw
91 1 0:5 /fuse /var/lib/c/dev/fuse rw - devtmpfs udev rw
92 1 0:5 /char /var/lib/c/dev/char rw - devtmpfs udev rw
93 1 0:40 / /var/lib/c/dev rw - tmpfs tmpfs rw
bad line
`
	want := []string{"/srv/chroot/sid x/dev", "/var/lib/c/dev/char", "/var/lib/c/dev/fuse"}
	got := devMounts(mountinfo)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("devMounts = %q, want %q", got, want)
	}
	if got := devMounts(""); len(got) != 0 {
		t.Errorf("devMounts without a devtmpfs = %q, want none", got)
	}
}

// TestPlanConfinement: the plan masks the runtime directory's bus, the
// user manager's directory and mosaic's own (made if missing), the bus in
// DBUS_SESSION_BUS_ADDRESS and the system bus (the FUSE device is not in
// the engine's own /dev: privateDev), and mounts
// the cgroup view on /sys/fs/cgroup.
func TestPlanConfinement(t *testing.T) {
	rt := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", rt)
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/elsewhere/bus,guid=x;unix:abstract=/tmp/dbus-y")
	tmux := t.TempDir()
	t.Setenv("TMUX_TMPDIR", tmux)
	screen := filepath.Join(t.TempDir(), "screen") // made by the plan
	t.Setenv("SCREENDIR", screen)
	root := t.TempDir()
	defer func(was []string) { screenRoots = was }(screenRoots)
	screenRoots = []string{root}
	home := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, "config"))
	t.Setenv("XDG_DATA_HOME", filepath.Join(home, "data"))
	// Flatpak's exports come first in the session's XDG_DATA_DIRS; a
	// root-owned entry is no place of the user's.
	exports := filepath.Join(home, "flatpak", "exports", "share")
	if err := os.MkdirAll(exports, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_DATA_DIRS", exports+":/usr/share")
	t.Setenv("XDG_CONFIG_DIRS", "/etc/xdg")
	p, err := planConfinement()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Join(home, "config", "systemd"), filepath.Join(home, "config", "environment.d"),
		filepath.Join(home, "config", "autostart"), filepath.Join(home, "data", "systemd"), filepath.Join(home, "data", "dbus-1"),
		filepath.Join(exports, "dbus-1"), filepath.Join(exports, "systemd")} {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() || !slices.Contains(p.Masks, d) {
			t.Errorf("the user manager's %s is not made and masked (%v): masks %v", d, err, p.Masks)
		}
	}
	if os.Getuid() != 0 && (slices.Contains(p.Masks, "/usr/share/dbus-1") || slices.Contains(p.Masks, "/etc/xdg/autostart")) {
		t.Errorf("masks %v cover root's directories of XDG_DATA_DIRS or XDG_CONFIG_DIRS", p.Masks)
	}
	if !slices.Contains(p.Runtime, rt) {
		t.Errorf("plan's runtime directories %v miss %s", p.Runtime, rt)
	}
	if len(p.Keep) != 0 {
		t.Errorf("plan keeps %v: nothing of the runtime directory comes back", p.Keep)
	}
	uid := strconv.Itoa(os.Getuid())
	for _, want := range []string{filepath.Join(rt, "bus"), filepath.Join(rt, "systemd"), filepath.Join(rt, "mosaic"),
		"/elsewhere/bus", "/run/dbus/system_bus_socket"} {
		if !slices.Contains(p.Masks, want) {
			t.Errorf("plan %v does not mask %s", p.Masks, want)
		}
	}
	for _, want := range []string{filepath.Join(tmux, "tmux-"+uid), "/tmp/tmux-" + uid, filepath.Join(rt, "tmux-"+uid), screen, root} {
		if !slices.Contains(p.Private, want) {
			t.Errorf("plan %v does not give the engine its own %s", p.Private, want)
		}
	}
	for _, d := range []string{filepath.Join(rt, "mosaic"), filepath.Join(tmux, "tmux-"+uid), filepath.Join(rt, "tmux-"+uid), screen} {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s not made 0700, for a server started later to be masked too: %v %v", d, fi, err)
		}
	}
	if p.CgroupMount != "/sys/fs/cgroup" {
		t.Errorf("cgroup view on %q", p.CgroupMount)
	}
	if _, err := procfs.Namespace(procfs.Self, "user"); err != nil {
		t.Errorf("procfs.Namespace: %v", err)
	}
	if ns, err := namespaces(os.Getpid()); err == nil {
		t.Errorf("this process's namespaces taken for an engine's: %v", ns)
	}
}

// TestHiddenDirs: a missing hidden path is made a directory, so a mask
// covers it from the start; a file there (a Claude env file) is masked
// as it is, not refused; a relative one is refused.
func TestHiddenDirs(t *testing.T) {
	root := t.TempDir()
	file, missing := filepath.Join(root, "claude.env"), filepath.Join(root, "state", "claims")
	if err := os.WriteFile(file, []byte("ANTHROPIC_API_KEY=k\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := hiddenDirs([]string{file, missing})
	if err != nil || !slices.Equal(got, []string{file, missing}) {
		t.Fatalf("hiddenDirs = %q, %v", got, err)
	}
	if st, err := os.Stat(missing); err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
		t.Errorf("the missing path was not made a 0700 directory: %v", err)
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "ANTHROPIC_API_KEY=k\n" {
		t.Errorf("the file was changed: %q, %v", b, err)
	}
	if _, err := hiddenDirs([]string{"state/claims"}); err == nil {
		t.Error("a relative path was taken")
	}
}

// TestOpenChmodFollowsNoLink: the display directories' mode is set
// through the directory itself, never through a link a tool put in its
// place in the shared /tmp (which would make one of the user's own
// directories writable by every user).
func TestOpenChmodFollowsNoLink(t *testing.T) {
	dir := t.TempDir()
	own := filepath.Join(dir, "ssh")
	if err := os.Mkdir(own, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, ".X11-unix")
	if err := os.Symlink(own, link); err != nil {
		t.Fatal(err)
	}
	openChmod(link, unix.S_ISVTX|0o777)
	if fi, err := os.Stat(own); err != nil || fi.Mode().Perm() != 0o700 || fi.Mode()&os.ModeSticky != 0 {
		t.Fatalf("the link's target is %v (%v); want it left 0700", fi.Mode(), err)
	}
	made := filepath.Join(dir, "made")
	if err := os.Mkdir(made, 0o700); err != nil {
		t.Fatal(err)
	}
	openChmod(made, unix.S_ISVTX|0o777)
	if fi, err := os.Stat(made); err != nil || fi.Mode().Perm() != 0o777 || fi.Mode()&os.ModeSticky == 0 {
		t.Fatalf("the directory is %v (%v); want 1777", fi.Mode(), err)
	}
}
