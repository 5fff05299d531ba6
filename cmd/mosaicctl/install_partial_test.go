package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/units"
)

// TestInstallIsAllOrNothing: an install that cannot write every unit file
// (a full disk; here a file size limit of 1 KiB, which the socket unit
// fits and the service unit does not) leaves the unit directory as it
// was: no new socket unit beside no service unit, or beside the service
// unit of the version before, and no temporary file.
func TestInstallIsAllOrNothing(t *testing.T) {
	bin := sandboxtest.Bin(t, "mosaicctl")
	limited := func(dir string) result {
		t.Helper()
		return runCmd(t, exec.Command("bash", "-c", `ulimit -f 1 && exec "$0" install --unit-dir "$1"`, bin, dir))
	}
	listing := func(dir string) map[string]string {
		t.Helper()
		ents, err := os.ReadDir(dir)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, e := range ents {
			b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
			out[e.Name()] = string(b)
		}
		return out
	}
	t.Run("fresh", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "units")
		r := limited(dir)
		if r.code == 0 {
			t.Fatalf("install under a 1 KiB file size limit: exit 0, stdout %q", r.stdout)
		}
		if got := listing(dir); len(got) != 0 {
			t.Fatalf("a failed install left %d files in %s: %v", len(got), dir, keys(got))
		}
	})
	t.Run("upgrade", func(t *testing.T) {
		dir := t.TempDir()
		if r := run(t, bin, "install", "--unit-dir", dir); !strings.Contains(r.stdout, "written") {
			t.Fatalf("install: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		// The version before: ours (the marker), other text.
		for _, name := range units.Names {
			p := filepath.Join(dir, name)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, append(b, "# the version before\n"...), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		before := listing(dir)
		if r := limited(dir); r.code == 0 {
			t.Fatalf("install under a 1 KiB file size limit: exit 0, stdout %q", r.stdout)
		}
		after := listing(dir)
		if len(after) != len(before) {
			t.Fatalf("a failed install changed the files of %s from %v to %v", dir, keys(before), keys(after))
		}
		for name, text := range before {
			if after[name] != text {
				t.Errorf("a failed install rewrote %s: a unit of the new version beside units of the old one", name)
			}
		}
	})
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
