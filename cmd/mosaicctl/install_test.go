package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mosaic-agents/mosaic/contrib/sandboxtest"
	"github.com/mosaic-agents/mosaic/contrib/stubmodel"
	"github.com/mosaic-agents/mosaic/internal/owner"
	"github.com/mosaic-agents/mosaic/units"
)

// TestInstallRunsACopyNoEngineCanReplace installs mosaicctl the way `make
// install PREFIX=~/…` does and runs `install` through a symlink on PATH:
// the binary is the user's to replace, and so any engine's, so the units
// run install's copy of it (same bytes, in units.BinDir), said once; a
// second install changes nothing and says nothing of the copy; one from
// a binary its user cannot replace (the sandbox's clone is root's) runs
// it where it is, and `install --global` of a replaceable binary is
// refused, naming the fix.
func TestInstallRunsACopyNoEngineCanReplace(t *testing.T) {
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
	dir, err := units.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	copied := filepath.Join(dir, "mosaicctl")
	unit := filepath.Join(home, ".config", "systemd", "user", "mosaic-conv@.service")

	r := run(t, link, "install")
	t.Cleanup(func() { run(t, installed, "uninstall", "--force") })
	if r.code != 0 || strings.Contains(r.stderr, "warning") || !strings.Contains(r.stderr, "the units run a copy of "+installed+" at "+copied) {
		t.Fatalf("install of a binary the user can replace: exit %d, stderr %q; want the copy named, no warning", r.code, r.stderr)
	}
	if b, err := os.ReadFile(unit); err != nil || !strings.Contains(string(b), "ExecStart="+copied+" serve") {
		t.Fatalf("the service unit does not run the copy %s:\n%s (%v)", copied, b, err)
	}
	want, _ := os.ReadFile(built)
	if got, err := os.ReadFile(copied); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the copy %s does not hold the binary's bytes (%v)", copied, err)
	}

	r = run(t, installed, "install")
	if r.code != 0 || r.stderr != "" || !strings.Contains(r.stdout, "nothing changed") {
		t.Fatalf("install again: exit %d, stdout %q, stderr %q; want nothing changed, quietly", r.code, r.stdout, r.stderr)
	}
	// Units written before install made copies, running the binary
	// itself: doctor names the risk and the fix.
	old, err := units.Render(installed)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := units.Install(filepath.Dir(unit), old, false); err != nil {
		t.Fatal(err)
	}
	if r := run(t, installed, "doctor"); !strings.Contains(r.stdout+r.stderr, "the units run "+installed+", which you, and so any engine of yours, can replace") {
		t.Fatalf("doctor with units that run a replaceable binary: %q %q", r.stdout, r.stderr)
	}
	mustRun(t, installed, "install")
	// The sandbox's clone is another user's (root's): the units run it
	// where it is, with the warning about the checkout.
	if !owner.BeyondUser(built) {
		t.Fatalf("%s is the sandbox user's own: the test expects the clone to be another user's", built)
	}
	r = run(t, built, "install")
	if r.code != 0 || !strings.Contains(r.stderr, "mosaicctl: warning: the units will run "+built+", inside the source checkout") {
		t.Fatalf("install from the build directory: exit %d, stderr %q; want the checkout warning", r.code, r.stderr)
	}
	if b, _ := os.ReadFile(unit); !strings.Contains(string(b), "ExecStart="+built+" serve") {
		t.Fatalf("the service unit does not run %s, which its user cannot replace:\n%s", built, b)
	}
	r = run(t, installed, "install", "--global", "--unit-dir", t.TempDir())
	if r.code == 0 || !strings.Contains(r.stderr, "sudo make install PREFIX=/usr/local") {
		t.Fatalf("install --global of a binary its owner can replace: exit %d, stderr %q; want a refusal naming the fix", r.code, r.stderr)
	}
}

// copyTool, run by the real Pi's bash tool, tries to see and to replace
// install's copy of mosaicctl (%[1]s, its directory %[2]s) and records
// each attempt's exit status.
const copyTool = `test -e %[1]s; echo "see $?" > copy.txt
printf '#!/bin/sh\necho owned\n' > planted; chmod +x planted
cp planted %[1]s 2>/dev/null; echo "write $?" >> copy.txt
mv %[2]s %[2]s.x 2>/dev/null; echo "move $?" >> copy.txt
echo done`

// TestEngineCannotReplaceTheControllerBinary: a bash tool of the real Pi
// can neither see, nor overwrite, nor move away install's copy of
// mosaicctl, which the next controller of every conversation runs, and
// the copy still holds the installed bytes after its turn; install's
// first copy is refused while an engine runs, unless forced.
func TestEngineCannotReplaceTheControllerBinary(t *testing.T) {
	sandboxtest.Require(t)
	dir, err := units.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	copied := filepath.Join(dir, "mosaicctl")
	// mosaicctl as `make install PREFIX=~/…` puts it, the user's to
	// replace: the units run install's copy of it.
	home, _ := os.UserHomeDir()
	prefix, err := os.MkdirTemp(home, "prefix-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(prefix) })
	bin := filepath.Join(prefix, "mosaicctl")
	mustRun(t, "install", "-m", "0755", sandboxtest.Bin(t, "mosaicctl"), bin)
	pi, model, _ := sandboxtest.StubPi(t, stubmodel.Script{Turns: []stubmodel.Turn{
		{Text: []string{"Replacing."}, Tool: &stubmodel.ToolCall{Command: fmt.Sprintf(copyTool, copied, dir)}},
		{Text: []string{"Tried."}},
	}})
	id, proj, _ := startConversation(t, bin, "copy", "--engine", pi, "--provider", model.Provider, "--model", model.Model, "--agent-dir", model.AgentDir)
	unit, _ := os.ReadFile(filepath.Join(home, ".config", "systemd", "user", "mosaic-conv@.service"))
	if !strings.Contains(string(unit), "ExecStart="+copied+" serve") {
		t.Fatalf("the units do not run install's copy %s:\n%s", copied, unit)
	}
	want, err := os.ReadFile(copied)
	if err != nil {
		t.Fatalf("install made no copy at %s: %v", copied, err)
	}
	if r := run(t, bin, "prompt", "--take", "--timeout", "2m", id, "replace"); r.code != 0 || !strings.Contains(r.stdout, "Tried.") {
		t.Fatalf("prompt: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	b, err := os.ReadFile(filepath.Join(proj, "copy.txt"))
	if err != nil || !strings.Contains(string(b), "move ") {
		t.Fatalf("the tool did not run its attempts: copy.txt %q (%v)", b, err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if strings.HasSuffix(line, " 0") {
			t.Errorf("the tool's attempt got through: %s", line)
		}
	}
	if got, err := os.ReadFile(copied); err != nil || !bytes.Equal(got, want) {
		t.Errorf("the copy %s changed under the tool's turn (%v)", copied, err)
	}
	// With no copy yet, an engine that runs may be one an older mosaicctl
	// launched without the copy's directory hidden: the first copy waits
	// for it to stop, or for --force.
	if err := os.Remove(copied); err != nil {
		t.Fatal(err)
	}
	if r := run(t, bin, "install"); r.code == 0 || !strings.Contains(r.stderr, "engine-alive") || !strings.Contains(r.stderr, "first copy") {
		t.Fatalf("install's first copy beside a running engine: exit %d, stderr %q; want engine-alive", r.code, r.stderr)
	}
	if r := run(t, bin, "install", "--force"); r.code != 0 {
		t.Fatalf("install --force: exit %d, stderr %q", r.code, r.stderr)
	}
	if got, err := os.ReadFile(copied); err != nil || !bytes.Equal(got, want) {
		t.Errorf("install --force made no copy at %s (%v)", copied, err)
	}
}
