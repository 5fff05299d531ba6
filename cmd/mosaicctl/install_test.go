package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
)

// TestInstallNamesAStablePath installs mosaicctl the way `make install
// PREFIX=…` does and runs `install` through a symlink on PATH: the units
// name the installed file (symlink resolved) and nothing is warned. The
// same command from the clone's .build/bin warns, naming the checkout and
// the fix.
func TestInstallNamesAStablePath(t *testing.T) {
	sandboxtest.Require(t)
	built := sandboxtest.Bin(t, "mosaicctl")
	home, _ := os.UserHomeDir()
	prefix, err := os.MkdirTemp(home, "prefix-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(prefix) })
	installed := filepath.Join(prefix, "bin", "mosaicctl")
	mustRun(t, "install", "-D", "-m", "0755", built, installed)
	link := filepath.Join(prefix, "path", "mosaicctl")
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(installed, link); err != nil {
		t.Fatal(err)
	}
	unit := filepath.Join(home, ".config", "systemd", "user", "mosaic-conv@.service")

	r := run(t, link, "install")
	t.Cleanup(func() { run(t, installed, "uninstall", "--force") })
	if r.code != 0 || strings.Contains(r.stderr, "warning") {
		t.Fatalf("install of an installed binary: exit %d, stderr %q; want no warning", r.code, r.stderr)
	}
	if b, err := os.ReadFile(unit); err != nil || !strings.Contains(string(b), "ExecStart="+installed+" serve") {
		t.Fatalf("the service unit does not run %s:\n%s (%v)", installed, b, err)
	}

	r = run(t, built, "install")
	if r.code != 0 || !strings.Contains(r.stderr, "mosaicctl: warning: the units will run "+built+", inside the source checkout") ||
		!strings.Contains(r.stderr, "make install PREFIX=") {
		t.Fatalf("install from the build directory: exit %d, stderr %q; want the warning with its fix", r.code, r.stderr)
	}
	if b, _ := os.ReadFile(unit); !strings.Contains(string(b), "ExecStart="+built+" serve") {
		t.Fatalf("the service unit does not run %s after installing from it:\n%s", built, b)
	}
}
