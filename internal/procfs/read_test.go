package procfs

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"testing"
)

// TestReadLikeReadFile: read gives what os.ReadFile gives, for a file
// longer than its first buffer too, and a process that does not exist is
// fs.ErrNotExist.
func TestReadLikeReadFile(t *testing.T) {
	for _, name := range []string{"stat", "cgroup", "status", "limits"} {
		got, err := read(os.Getpid(), name)
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(Path(os.Getpid(), name))
		if err != nil {
			t.Fatal(err)
		}
		if name != "stat" && name != "status" && !bytes.Equal(got, want) { // stat and status move between reads
			t.Fatalf("%s: %d bytes, os.ReadFile %d", name, len(got), len(want))
		}
		if len(got) == 0 || len(want) > 512 && len(got) <= 512 {
			t.Fatalf("%s: %d bytes", name, len(got))
		}
	}
	if _, err := read(1<<30, "stat"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a pid that does not exist: %v", err)
	}
}
