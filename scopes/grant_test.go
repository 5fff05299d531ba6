package scopes

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestGrantNotesBounded: a tool that keeps taking the owner's access away
// while opens restore it, with no kill phase to take the notes, leaves at
// most maxGrantNotes notes, one per distinct path (a path restored again
// is counted on its note) and one counting the paths past the bound.
func TestGrantNotesBounded(t *testing.T) {
	for _, tc := range []struct {
		name          string
		paths, repeat int
		want          int // notes the kill phase gets
		unlisted      int
	}{
		{name: "few paths", paths: 3, repeat: 4, want: 3},
		{name: "many paths", paths: 100, repeat: 5, want: 64 + 1, unlisted: 100 - 64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mount := t.TempDir()
			cg := filepath.Join(mount, "cg")
			if err := os.Mkdir(cg, 0o755); err != nil {
				t.Fatal(err)
			}
			fd, err := unix.Open(cg, unix.O_PATH|unix.O_DIRECTORY, 0)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { unix.Close(fd) })
			c := &cgroupFS{mount: mount, fd: -1}
			grant := func(name string) {
				t.Helper()
				if err := os.Chmod(filepath.Join(cg, name), 0); err != nil {
					t.Fatal(err)
				}
				if err := c.grantOwner(fd, "cg", name, unix.O_RDONLY); err != nil {
					t.Fatal(err)
				}
			}
			for i := range tc.paths {
				name := fmt.Sprintf("d%03d", i)
				if err := os.Mkdir(filepath.Join(cg, name), 0o755); err != nil {
					t.Fatal(err)
				}
				grant(name)
			}
			for range tc.repeat {
				grant("d000")
			}
			notes := c.takeGranted("cg")
			if len(notes) != tc.want {
				t.Fatalf("%d notes after %d paths restored, one %d more times; want %d:\n%s", len(notes), tc.paths, tc.repeat, tc.want, strings.Join(notes, "\n"))
			}
			if !strings.Contains(notes[0], "cg/d000 was mode 0000") || !strings.Contains(notes[0], fmt.Sprintf("restored %d more time(s)", tc.repeat)) {
				t.Fatalf("first note %q; want d000 with its %d repeats", notes[0], tc.repeat)
			}
			if last := notes[len(notes)-1]; tc.unlisted > 0 && !strings.Contains(last, fmt.Sprintf("%d more path(s), not listed", tc.unlisted)) {
				t.Fatalf("last note %q; want the %d paths past the bound counted", last, tc.unlisted)
			}
			if again := c.takeGranted("cg"); len(again) != 0 {
				t.Fatalf("notes taken twice: %q", again)
			}
		})
	}
}
