package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/conversations"
	"github.com/mosaic-agents/mosaic/engine/pi"
	"github.com/mosaic-agents/mosaic/units"
)

// TestRelativeEngineIsStoredAbsolute: --engine and --node name files as a
// shell does, a relative path against the directory conv add runs in; the
// pin stores the absolute path, so where the controller later runs from
// never matters (and a relative path in a hand-edited file is refused).
func TestRelativeEngineIsStoredAbsolute(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir()) // the pin's manifest cache
	t.Setenv("HOME", t.TempDir())
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pkg := filepath.Join(root, "pkg")
	must(t, os.MkdirAll(filepath.Join(root, "sub"), 0o755))
	must(t, os.MkdirAll(pkg, 0o755))
	must(t, os.WriteFile(filepath.Join(pkg, "package.json"),
		[]byte(`{"name":"`+pi.PinnedPackage+`","version":"`+pi.PinnedVersion+`","bin":{"pi":"pi.sh"}}`), 0o644))
	must(t, os.WriteFile(filepath.Join(pkg, "pi.sh"), []byte("#!/bin/sh\nexit 0\n"), 0o755))
	for _, tc := range []struct{ dir, engine string }{
		{root, "pkg/pi.sh"},
		{root, "./pkg/pi.sh"},
		{filepath.Join(root, "sub"), "../pkg/pi.sh"},
	} {
		t.Run(tc.engine, func(t *testing.T) {
			t.Chdir(tc.dir)
			cv := &conversations.Conversation{}
			if err := pinEngine(cv, tc.engine, ""); err != nil {
				t.Fatal(err)
			}
			if want := filepath.Join(pkg, "pi.sh"); cv.Engine.Path != want || cv.Engine.Entry != want {
				t.Fatalf("engine path %q, entry %q; want both %s", cv.Engine.Path, cv.Engine.Entry, want)
			}
		})
	}
}

// TestUnitHelpNamesEveryUnit: install and uninstall say which units they
// write and remove: every family of units.Names.
func TestUnitHelpNamesEveryUnit(t *testing.T) {
	for _, cmd := range []string{"install", "uninstall"} {
		t.Run(cmd, func(t *testing.T) {
			for _, c := range newApp().Commands {
				if c.Name != cmd {
					continue
				}
				for _, name := range units.Names {
					family, _, _ := strings.Cut(strings.SplitN(name, ".", 2)[0], "@")
					if !strings.Contains(c.Usage, family) {
						t.Errorf("%s --help %q does not name the %s units", cmd, c.Usage, family)
					}
				}
				return
			}
			t.Fatalf("no command %s", cmd)
		})
	}
}
