package procfs

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"testing"
)

func TestParseStat(t *testing.T) {
	// Field 22 counted after a comm that holds spaces and parentheses.
	tail := " S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 4242 19 20\n"
	for _, tc := range []struct {
		in, comm string
		start    uint64
		bad      bool
	}{
		{"12 (sleep)" + tail, "sleep", 4242, false},
		{"12 (a) b (c))" + tail, "a) b (c)", 4242, false},
		{"12 ( )" + tail, " ", 4242, false},
		{"12 sleep S 1", "", 0, true},
		{"12 (sleep) S 1 2", "", 0, true},
		{"12 (sleep) S x 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 4242 19 20\n", "", 0, true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			st, err := ParseStat([]byte(tc.in))
			if tc.bad {
				if err == nil {
					t.Errorf("%q: no error", tc.in)
				}
				return
			}
			if err != nil || st.Comm != tc.comm || st.StartTime != tc.start || st.PPID != 1 {
				t.Errorf("%q: %+v %v", tc.in, st, err)
			}
		})
	}
}

func TestParseCgroup(t *testing.T) {
	in := []byte("1:name=systemd:/\n0::/a/b.scope/engine\n")
	cg, err := ParseCgroup2(in)
	if err != nil || cg != "/a/b.scope/engine" {
		t.Fatalf("%q %v", cg, err)
	}
	if _, err := ParseCgroup2([]byte("4:memory:/\n")); err == nil {
		t.Fatal("no 0:: line accepted")
	}
	if got := ParseCgroups([]byte("1:name=systemd:/\n0::/a:b/c\n")); !slices.Equal(got, []string{"/", "/a:b/c"}) {
		t.Fatalf("ParseCgroups = %q", got)
	}
	if got := ParseCgroups([]byte("\n")); len(got) != 0 {
		t.Fatalf("ParseCgroups of nothing = %q", got)
	}
}

// TestSelf reads this process: its parent, start time, cgroup,
// namespaces and pid chain, each as another reader of /proc sees them.
func TestSelf(t *testing.T) {
	st, err := ReadStat(os.Getpid())
	if err != nil || st.PPID != os.Getppid() || st.StartTime == 0 {
		t.Fatalf("ReadStat(self) = %+v, %v; want parent %d", st, err, os.Getppid())
	}
	if self, err := ReadStat(Self); err != nil || self != st {
		t.Fatalf("ReadStat(Self) = %+v, %v; want %+v", self, err, st)
	}
	if _, err := Cgroup2(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	if paths, err := Cgroups(Self); err != nil || len(paths) == 0 {
		t.Fatalf("Cgroups(Self) = %q, %v", paths, err)
	}
	for _, typ := range []string{"user", "pid", "mnt", "cgroup"} {
		a, err := Namespace(os.Getpid(), typ)
		if err != nil || a.Ino == 0 {
			t.Fatalf("Namespace(%s) = %+v, %v", typ, a, err)
		}
		if b, err := Namespace(Self, typ); err != nil || a != b {
			t.Fatalf("Namespace(Self, %s) = %+v, %v; want %+v", typ, b, err, a)
		}
	}
	ns, err := NSpid(os.Getpid())
	if err != nil || len(ns) == 0 {
		t.Fatalf("NSpid = %v, %v", ns, err)
	}
	if id, err := BootID(); err != nil || !regexp.MustCompile(`^[0-9a-f-]{36}$`).MatchString(id) {
		t.Fatalf("BootID = %q, %v", id, err)
	}
	if hz := ClockTicks(); hz == 0 {
		t.Fatal("ClockTicks = 0")
	}
	if a, b := BoottimeNanos(), BoottimeNanos(); a == 0 || b < a {
		t.Fatalf("BoottimeNanos went %d then %d", a, b)
	}
}

// TestGone: a process that exited and was reaped reads as
// fs.ErrNotExist from every reader, never as a parse error.
func TestGone(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip(err)
	}
	pid := cmd.Process.Pid
	if _, err := ReadStat(pid); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadStat(gone) = %v", err)
	}
	if _, err := Cgroup2(pid); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Cgroup2(gone) = %v", err)
	}
	if _, err := Cgroups(pid); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Cgroups(gone) = %v", err)
	}
	if _, err := Namespace(pid, "user"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Namespace(gone) = %v", err)
	}
	if _, err := NSpid(pid); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("NSpid(gone) = %v", err)
	}
}
