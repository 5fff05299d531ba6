package scopes

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// attachProbe is what a tool does to take its engine's stdout without
// Yama: it opens its parent's memory (PTRACE_MODE_ATTACH, the check
// pidfd_getfd and PTRACE_ATTACH make too), then reads where its stdout
// leads (the link of a descriptor needs PTRACE_MODE_READ; listing the
// directory needs only its owner's uid).
const attachProbe = `if exec 3</proc/$PPID/mem; then echo mem-opened; else echo mem-refused; fi
if readlink /proc/$PPID/fd/1 >/dev/null; then echo fd-read; else echo fd-refused; fi
mkdir -p a b && echo x > a/f && mv a/f b/f && echo moved
echo "args $0 $1"`

// toolShellRun runs this test binary as the tool shell (by its name, as
// a confined Pi does) with a shell's arguments, this process its parent,
// as an engine is a tool's, and returns what it printed.
func toolShellRun(t *testing.T, shell, script string) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(shell, "-c", script, "zero", "one")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s -c: %v\n%s", shell, err, out)
	}
	return string(out)
}

// TestToolShellNestsADomain: a command the tool shell runs cannot open
// its parent's memory nor list its descriptors, where the same command
// under plain bash can (on a kernel without Yama or with ptrace_scope 0,
// which is the hole); it still renames into another directory and gets
// the shell's arguments.
func TestToolShellNestsADomain(t *testing.T) {
	if why := toolsNestable(); why != "" {
		t.Skip(why)
	}
	link := toolShellLink(t)
	got := toolShellRun(t, link, attachProbe)
	for _, want := range []string{"mem-refused", "fd-refused", "moved", "args zero one"} {
		if !strings.Contains(got, want) {
			t.Errorf("the tool shell printed %q, want %q in it", got, want)
		}
	}
	// The control: without the domain the same command attaches, where
	// Yama lets a child attach to its parent.
	if b, err := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope"); err == nil && strings.TrimSpace(string(b)) != "0" {
		t.Logf("Yama's ptrace_scope is %s: no control run", strings.TrimSpace(string(b)))
		return
	}
	if plain := toolShellRun(t, "/bin/bash", attachProbe); !strings.Contains(plain, "mem-opened") || !strings.Contains(plain, "fd-read") {
		t.Fatalf("plain bash printed %q: the probe does not attach even without the domain, so its refusal above proves nothing", plain)
	}
}

// TestToolShellAsLoginShell: run as a login shell ("-mosaic-bash", the
// argv[0] tmux, screen and login(1) give $SHELL, which Claude Code sets to
// the tool shell for its Bash commands), the tool shell is still the tool
// shell, nests its domain, and runs bash as a login shell.
func TestToolShellAsLoginShell(t *testing.T) {
	if why := toolsNestable(); why != "" {
		t.Skip(why)
	}
	link := toolShellLink(t)
	cmd := exec.Command(link, "-c", `shopt -q login_shell && echo login-shell; echo "arg0 $0"; if exec 3</proc/$PPID/mem; then echo mem-opened; else echo mem-refused; fi`)
	cmd.Args[0] = "-" + toolShellName
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("-%s -c: %v\n%s", toolShellName, err, out)
	}
	for _, want := range []string{"login-shell", "arg0 -bash", "mem-refused"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the tool shell as a login shell printed %q, want %q in it", out, want)
		}
	}
}

// toolShellLink is a link named as the tool shell to this test binary,
// which MaybeRunHeld makes the tool shell by that name.
func toolShellLink(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), toolShellName)
	if err := os.Symlink(exe, link); err != nil {
		t.Fatal(err)
	}
	return link
}
