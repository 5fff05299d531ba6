package detour

import (
	"os"
	"path/filepath"
	"testing"
)

func TestFind(t *testing.T) {
	root := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "d", "e"), 0o755))
	must(os.WriteFile(filepath.Join(root, "d", "f"), nil, 0o600))
	must(os.Symlink(filepath.Join(root, "d"), filepath.Join(root, "link")))
	must(os.Symlink("nowhere", filepath.Join(root, "d", "dangling")))
	locked := filepath.Join(root, "locked")
	must(os.Mkdir(locked, 0o700))
	for _, tc := range []struct {
		name, path string
		want       Detour
	}{
		{"plain directories", filepath.Join(root, "d", "e"), Detour{}},
		{"a file last", filepath.Join(root, "d", "f"), Detour{}},
		{"missing below a directory", filepath.Join(root, "d", "e", "x", "y"), Detour{}},
		{"a link in the middle", filepath.Join(root, "link", "e"), Detour{At: filepath.Join(root, "link"), Link: true}},
		{"a link last", filepath.Join(root, "link"), Detour{At: filepath.Join(root, "link"), Link: true}},
		{"a dangling link last", filepath.Join(root, "d", "dangling"), Detour{At: filepath.Join(root, "d", "dangling"), Link: true}},
		{"a file in the middle", filepath.Join(root, "d", "f", "x"), Detour{At: filepath.Join(root, "d", "f")}},
		{"doubled and trailing slashes", root + "//d//f//x/", Detour{At: filepath.Join(root, "d", "f")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Find(tc.path)
			if err != nil || got != tc.want {
				t.Fatalf("Find(%s) = %+v, %v; want %+v", tc.path, got, err, tc.want)
			}
		})
	}
	t.Run("an unreadable directory is an error, not a clean path", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("root reads every directory")
		}
		must(os.Chmod(locked, 0))
		t.Cleanup(func() { os.Chmod(locked, 0o700) })
		if d, err := Find(filepath.Join(locked, "x", "y")); err == nil {
			t.Fatalf("Find under an unreadable directory = %+v, nil; want an error", d)
		}
	})
	t.Run("strings", func(t *testing.T) {
		for d, want := range map[Detour]string{{}: "", {At: "/a", Link: true}: "/a is a symlink", {At: "/b"}: "/b is not a directory"} {
			if got := d.String(); got != want {
				t.Errorf("%+v.String() = %q, want %q", d, got, want)
			}
		}
	})
}
