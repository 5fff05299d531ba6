package activation

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

func TestEngineScope(t *testing.T) {
	tests := []struct {
		paths []string
		want  string
	}{
		{[]string{"/user.slice/user-1000.slice/user@1000.service/app.slice/app-mosaic.slice/mosaic-engine-pi\\x2dab-ex\\x2dcd.scope/engine"}, "mosaic-engine-pi\\x2dab-ex\\x2dcd.scope"},
		{[]string{"/a/mosaic-engine-x.scope"}, "mosaic-engine-x.scope"},
		{[]string{"/user.slice/user-1000.slice/session-3.scope"}, ""},
		{[]string{"/app.slice/mosaic-engine-x.service"}, ""},                                // not a scope
		{[]string{"/app.slice/run-mosaic-engine-x.scope"}, ""},                              // prefix, not a part
		{[]string{"/", "/app.slice/mosaic-engine-y.scope/engine"}, "mosaic-engine-y.scope"}, // a v1 line, then v2
	}
	for _, tt := range tests {
		if got := engineScope(tt.paths); got != tt.want {
			t.Errorf("engineScope(%q) = %q, want %q", tt.paths, got, tt.want)
		}
	}
}

// TestParentOfOddNames: the parent is read after the last ')' of
// /proc/<pid>/stat, so a command name with spaces and parentheses (which
// a process chooses) cannot shift it.
func TestParentOfOddNames(t *testing.T) {
	// comm is the basename the program was run by.
	odd := filepath.Join(t.TempDir(), "a) S 1 (b")
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip(err)
	}
	if err := os.Symlink(sleep, odd); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(odd, "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	if b, _ := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/comm"); string(b) != "a) S 1 (b\n" {
		t.Fatalf("comm %q", b)
	}
	ppid, err := parentOf(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if ppid != os.Getpid() {
		t.Fatalf("parentOf = %d, want %d", ppid, os.Getpid())
	}
}

func TestJudgeSelf(t *testing.T) {
	j, err := NewJudge()
	if err != nil {
		t.Fatal(err)
	}
	p, err := ProcessPeer(os.Getpid())
	if err != nil {
		t.Skipf("no pidfd_open: %v", err)
	}
	defer p.Close()
	if v := j.Judge(p); v.Engine {
		t.Fatalf("this process judged an engine peer: %s", v.Reason)
	}
	if v := j.Judge(&Peer{Cred: Cred{PID: os.Getpid()}, pidfd: -1}); !v.Engine {
		t.Fatal("a peer without a pidfd was vouched for")
	}
	if v := j.Judge(&Peer{pidfd: -1}); !v.Engine {
		t.Fatal("a peer the kernel names no pid for was vouched for")
	}
}
