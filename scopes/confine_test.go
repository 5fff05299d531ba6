package scopes

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mosaic-agents/mosaic/internal/procfs"
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

// TestPlanConfinement: the plan masks the runtime directory's bus, the
// user manager's directory and mosaic's own (made if missing), the bus in
// DBUS_SESSION_BUS_ADDRESS, the system bus and the FUSE device, and mounts
// the cgroup view on /sys/fs/cgroup.
func TestPlanConfinement(t *testing.T) {
	rt := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", rt)
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/elsewhere/bus,guid=x;unix:abstract=/tmp/dbus-y")
	p, err := planConfinement()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{filepath.Join(rt, "bus"), filepath.Join(rt, "systemd"), filepath.Join(rt, "mosaic"),
		"/elsewhere/bus", "/run/dbus/system_bus_socket", "/dev/fuse"} {
		if !slices.Contains(p.Masks, want) {
			t.Errorf("plan %v does not mask %s", p.Masks, want)
		}
	}
	if fi, err := os.Stat(filepath.Join(rt, "mosaic")); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Errorf("mosaic's runtime directory not made 0700: %v %v", fi, err)
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
